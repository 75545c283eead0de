#include "ratelimit/api/admin_tokens.hpp"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "core/counted.hpp"
#include "core/log.hpp"
#include "core/problem.hpp"
#include "core/strings.hpp"

namespace sluice::ratelimit::api {

namespace {

std::array<unsigned char, 32> digest_of(std::string_view s) {
  std::array<unsigned char, 32> d{};
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d.data());
  return d;
}

}  // namespace

core::problem admin_tokens::parse(const std::string& text, parsed& out) {
  out = {};
  const auto lines = core::split(text, '\n');
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto token = core::trim_space(lines[i]);
    if (token.empty() || token.front() == '#') continue;
    for (unsigned char c : token) {
      if (c <= 0x20 || c >= 0x7f)
        return core::cat("line ", i + 1, ": a token is printable ASCII without spaces");
    }
    if (token.size() < min_admin_token_length)
      return core::cat("line ", i + 1, ": a token needs at least ", min_admin_token_length, " characters");
    out.digests.push_back(digest_of(token));
    out.lines.push_back(i + 1);
  }
  if (out.digests.empty()) return std::string("holds no token (one per line)");
  return std::nullopt;
}

admin_tokens::admin_tokens(std::string path)
    : file_(
          path,
          [this, path](const std::string& text) -> std::optional<std::string> {
            auto next = std::make_shared<parsed>();
            if (auto problem = parse(text, *next)) return problem;
            const auto count = next->digests.size();
            {
              std::lock_guard lock(mutex_);
              current_ = std::move(next);
            }
            core::log_info("ADMIN_TOKEN_FILE ", path, ": ", core::counted(count, "token", "tokens"),
                           " in force");
            return std::nullopt;
          },
          // Fail closed: a token file removed (a token withdrawn by deleting the file) leaves no token valid.
          [this] {
            std::lock_guard lock(mutex_);
            current_.reset();
            return std::string(
                "every ADMIN_TOKEN_FILE token is revoked: counter changes are refused until it is "
                "back");
          }) {}

void admin_tokens::watch(boost::asio::any_io_executor ex) {
  file_.watch(std::move(ex));
}

void admin_tokens::stop() {
  file_.stop();
}

bool admin_tokens::revoked() const {
  std::lock_guard lock(mutex_);
  return !current_;
}

std::optional<std::size_t> admin_tokens::match(std::string_view token) const {
  std::shared_ptr<const parsed> tokens;
  {
    std::lock_guard lock(mutex_);
    tokens = current_;  // a reload while this request runs does not change what it compares with
  }
  if (!tokens) return std::nullopt;
  const auto presented = digest_of(token);
  std::optional<std::size_t> line;
  // Every digest is compared, whichever matches.
  for (std::size_t i = 0; i < tokens->digests.size(); ++i) {
    const bool equal = CRYPTO_memcmp(presented.data(), tokens->digests[i].data(), presented.size()) == 0;
    if (equal && !line) line = tokens->lines[i];
  }
  return line;
}

std::optional<std::string_view> bearer_token(std::string_view authorization, std::string& problem) {
  if (authorization.empty()) {
    problem = "a change needs Authorization: Bearer <token> (a token of ADMIN_TOKEN_FILE)";
    return std::nullopt;
  }
  const auto space = authorization.find(' ');
  if (space == std::string_view::npos || !core::iequals(authorization.substr(0, space), "Bearer")) {
    problem = "the Authorization header's scheme must be Bearer";
    return std::nullopt;
  }
  const auto token = core::trim_space(authorization.substr(space + 1));
  if (token.empty()) {
    problem = "the Authorization header holds no token";
    return std::nullopt;
  }
  return token;
}

}  // namespace sluice::ratelimit::api
