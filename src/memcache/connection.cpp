#include "memcache/connection.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "core/pipelined_link.hpp"
#include "core/strings.hpp"
#include "memcache/error.hpp"

namespace sluice::memcache {

namespace asio = boost::asio;
using boost::system::error_code;

struct connection::impl {
  using link_type = core::pipelined_link<pipeline, error>;

  impl(asio::any_io_executor ex, connection_config c)
      : config(std::move(c)), link(ex, config), connect_timer(ex) {}

  connection_config config;
  link_type link;  // the socket, the pipeline, the I/O loops and the connection's state
  asio::steady_timer connect_timer;

  // link_type's protocol (core/pipelined_link.hpp).
  asio::awaitable<error_code> connect_once();
  std::string peer() const { return "memcached at " + config.address; }
  std::string malformed_reply() const {
    return core::cat("an unexpected reply (", link.requests.last_parse_error(), ")");
  }
  std::string_view next_write() { return link.requests.prepare_write(); }

  void shutdown() {
    link.shutdown();
    connect_timer.cancel();
  }
};

// TCP (each resolved address in turn), then the TLS handshake, all within the connect timeout.
asio::awaitable<error_code> connection::impl::connect_once() {
  connect_timer.expires_after(config.connect_timeout);
  const auto colon = config.address.rfind(':');
  if (colon == std::string::npos) co_return asio::error::invalid_argument;
  // SRV targets are fully qualified ("cache-1.example.org."): glibc's hosts file does not match such a
  // name, and a certificate does not name it, so the final dot is dropped.
  std::string host = core::host_of(config.address);
  if (host.size() > 1 && host.back() == '.') host.pop_back();
  const auto address = core::host_port(host, config.address.substr(colon + 1));
  if (auto ec = co_await link.connect_socket(address, false, connect_timer); ec) co_return ec;
  if (!config.tls) co_return error_code{};
  co_return co_await link.tls_handshake(*config.tls, host, config.skip_hostname_verification, connect_timer);
}

connection::connection(asio::any_io_executor ex, connection_config config)
    : impl_(std::make_shared<impl>(std::move(ex), std::move(config))) {}

connection::~connection() {
  stop();
}

void connection::start() {
  asio::co_spawn(
      impl_->link.socket.get_executor(), [self = impl_] { return self->link.run(*self, self); },
      asio::detached);
}

void connection::stop() {
  if (impl_->link.stopping.exchange(true)) return;
  asio::post(impl_->link.socket.get_executor(), [self = impl_] { self->shutdown(); });
}

void connection::exec(std::shared_ptr<pending_request> request) {
  impl_->link.enqueue(std::move(request));
}

bool connection::connected() const {
  return impl_->link.connected.load(std::memory_order_acquire);
}

bool connection::accepting() const {
  return impl_->link.accepting();
}

std::string connection::last_error() const {
  return impl_->link.last_error();
}

}  // namespace sluice::memcache
