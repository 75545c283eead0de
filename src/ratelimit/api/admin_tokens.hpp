#pragma once
// ADMIN_TOKEN_FILE: the bearer tokens that may change counters (docs/guides/operate.md). One token per
// line, so that an old and a new one are both valid during a rotation; blank lines and lines starting with
// '#' are skipped. The file is re-read when it changes (core::watched_file): a file with no token, or with
// a token too short to be a secret, is refused and the tokens loaded before stay; a file deleted revokes
// every token (fail closed) until it is back. A presented token is
// hashed (SHA-256) and compared with every line's digest in constant time, so the comparison's time tells
// nothing of the tokens (nor of which line matched).

#include <array>
#include <boost/asio/any_io_executor.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/problem.hpp"
#include "core/watched_file.hpp"

namespace sluice::ratelimit::api {

inline constexpr std::size_t min_admin_token_length = 16;

class admin_tokens {
 public:
  // Reads the file now; throws std::runtime_error naming it and what is wrong.
  explicit admin_tokens(std::string path);
  void watch(boost::asio::any_io_executor ex);
  void stop();
  const std::string& path() const { return file_.path(); }

  // The line (1-based) of the file that holds `token`, or nothing.
  std::optional<std::size_t> match(std::string_view token) const;
  // The file was deleted: no token is valid.
  bool revoked() const;

  // The tokens of a file's text with their lines, or what is wrong with it (exposed for tests).
  struct parsed {
    std::vector<std::array<unsigned char, 32>> digests;
    std::vector<std::size_t> lines;
  };
  static core::problem parse(const std::string& text, parsed& out);

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const parsed> current_;
  core::watched_file file_;
};

// The token of an `Authorization: Bearer <token>` header, or why there is none.
std::optional<std::string_view> bearer_token(std::string_view authorization, std::string& problem);

}  // namespace sluice::ratelimit::api
