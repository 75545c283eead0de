#include "redis/connection_impl.hpp"

#include <algorithm>

namespace sluice::redis {

std::shared_ptr<asio::ssl::context> make_tls_context(const tls_config& tls) {
  return core::make_tls_client_context(tls,
                                       {"REDIS_TLS_CACERT", "REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY"});
}

// Writes a request on the current stream and reads all its replies (a Redis error reply is a value).
asio::awaitable<error_code> connection::impl::exchange(const request& r, std::vector<value>& replies,
                                                       asio::steady_timer& timer) {
  auto written = co_await (link.write(asio::buffer(r.payload())) || timer.async_wait(use_tuple));
  if (written.index() == 1) co_return error::connect_timeout;
  if (auto ec = std::get<0>(std::get<0>(written)); ec) co_return ec;
  std::string buffer;
  replies.clear();
  while (replies.size() < r.expected_replies()) {
    value reply;
    std::size_t consumed = 0;
    std::string problem;
    auto status = parse_reply(buffer, consumed, reply, problem);
    if (status == parse_status::protocol_error) {
      link.attempt_error = "protocol error: " + problem;
      co_return error::protocol_error;
    }
    if (status == parse_status::complete) {
      buffer.erase(0, consumed);
      replies.push_back(std::move(reply));
      continue;
    }
    char chunk[512];
    auto read = co_await (link.read_some(asio::buffer(chunk)) || timer.async_wait(use_tuple));
    if (read.index() == 1) co_return error::connect_timeout;
    auto [ec, n] = std::get<0>(read);
    if (ec) co_return ec;
    buffer.append(chunk, n);
  }
  co_return error_code{};
}

// Redis's refusal of the secret (rather than of the connection for another reason), or null.
static const value* secret_refusal(const std::vector<value>& replies) {
  const auto it = std::ranges::find_if(replies, [](const value& r) {
    return r.is_error() && (r.text.starts_with("WRONGPASS") || r.text.starts_with("NOAUTH"));
  });
  return it == replies.end() ? nullptr : &*it;
}

static bool refuses_secret(const std::vector<value>& replies) {
  return secret_refusal(replies) != nullptr;
}

// Asks each sentinel in turn where the master is (SENTINEL get-master-addr-by-name); the first answer wins.
asio::awaitable<error_code> connection::impl::find_master(std::string& address, asio::steady_timer& timer) {
  const auto& s = *config.sentinel;
  request ask;
  const auto sentinel_secret = secret_of(s);
  ask.push_auth(sentinel_secret.username, sentinel_secret.password);
  ask.push({"SENTINEL", "get-master-addr-by-name", s.master_name});
  std::string problems;
  for (const auto& sentinel : s.sentinels) {
    std::vector<value> replies;
    auto ec = co_await link.connect_socket(sentinel, false, timer);
    if (!ec) ec = co_await exchange(ask, replies, timer);
    link.close();
    std::string problem = ec ? ec.message() : std::string();
    if (!ec) {
      const value& where = replies.back();
      if (where.type == value::kind::array && where.elements.size() == 2) {
        const auto& ip = where.elements[0].text;
        address = core::host_port(ip, where.elements[1].text);
        co_return error_code{};
      }
      problem = where.is_error() ? where.text : core::cat("does not know master '", s.master_name, "'");
      if (s.auth_file && refuses_secret(replies)) {
        problem = core::cat("refused the secret of ", s.auth_file->describe(), ": ", problem);
        s.auth_file->refused();
      }
    }
    problems += core::cat(problems.empty() ? "" : "; ", sentinel, ": ", problem);
  }
  link.attempt_error =
      core::cat("no sentinel gave the address of master '", s.master_name, "' (", problems, ")");
  co_return error::not_connected;
}

asio::awaitable<error_code> connection::impl::connect_once() {
  asio::steady_timer timer(strand);
  timer.expires_after(config.connect_timeout);
  std::string address = config.address;
  current_address = address;
  if (config.sentinel) {
    if (auto ec = co_await find_master(address, timer); ec) co_return ec;
  }
  current_address = address;
  if (auto ec = co_await link.connect_socket(address, config.unix_socket, timer); ec) co_return ec;
  if (tls_context) {
    if (auto ec = co_await tls_handshake(timer); ec) co_return ec;
  }
  co_return co_await handshake(timer);
}

asio::awaitable<error_code> connection::impl::tls_handshake(asio::steady_timer& timer) {
  const auto ec = co_await link.tls_handshake(*tls_context, core::host_of(current_address),
                                              config.tls.skip_hostname_verification, timer);
  if (ec && ec != error::connect_timeout)
    link.attempt_error =
        core::cat("TLS handshake with Redis at ", current_address, " failed: ", ec.message());
  co_return ec;
}

// AUTH when a password is set, then PING: the connection counts as up only when Redis answers. Behind
// sentinels, ROLE too: a master the sentinels have just demoted must not be used.
// A secret from a file that Redis refuses is read again, and tried once more at once when it changed (a
// rotation the file watch has not reported yet).
asio::awaitable<error_code> connection::impl::handshake(asio::steady_timer& timer) {
  for (int attempt = 0;; ++attempt) {
    std::vector<value> replies;
    const auto ec = co_await hello(replies, timer);
    // Named, so that the log says which file to fix.
    if (const auto* refusal = secret_refusal(replies);
        ec == error::auth_failed && config.auth_file && refusal) {
      link.attempt_error = core::cat("Redis at ", current_address, " refused the secret of ",
                                     config.auth_file->describe(), ": ", refusal->text);
    }
    if (ec != error::auth_failed || !config.auth_file || attempt > 0 || !refuses_secret(replies) ||
        !config.auth_file->refused())
      co_return ec;
  }
}

asio::awaitable<error_code> connection::impl::hello(std::vector<value>& replies, asio::steady_timer& timer) {
  request hello;
  const auto auth = secret_of(config);
  hello.push_auth(auth.username, auth.password);
  hello.push({"PING"});
  if (config.sentinel) hello.push({"ROLE"});
  if (auto ec = co_await exchange(hello, replies, timer); ec) {
    // With TLS 1.3 a server that refuses the client certificate says so only after the client's handshake
    // completed: the first exchange then fails.
    if (link.tls && link.attempt_error.empty()) {
      link.attempt_error =
          core::cat("Redis at ", current_address, " closed the connection after the TLS handshake (",
                    ec.message(), "): was the client certificate refused?");
    }
    co_return ec;
  }
  for (const auto& reply : replies) {
    if (reply.is_error()) {
      link.attempt_error = "Redis refused the connection: " + reply.text;
      co_return error::auth_failed;
    }
  }
  if (config.sentinel) {
    const auto& role = replies.back();
    if (role.type != value::kind::array || role.elements.empty() || role.elements[0].text != "master") {
      link.attempt_error = core::cat(current_address, ", named by the sentinels, is not the master (yet)");
      co_return error::not_connected;
    }
  }
  co_return error_code{};
}

}  // namespace sluice::redis
