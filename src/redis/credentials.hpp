#pragma once
// REDIS_AUTH_FILE, REDIS_SENTINEL_AUTH_FILE, REDIS_PERSECOND_AUTH_FILE
// (docs/guides/replicas.md#rotating-redis-credentials), and each line of REDIS_REMOTE_AUTH_FILE
// (docs/guides/regions.md): a Redis secret that rotates. The file holds a
// password or `user:password` (split at the first ':', as REDIS_AUTH); surrounding whitespace and a final
// newline are dropped. It is read at start, re-read when it changes (core::watched_file) and when Redis
// refuses it (WRONGPASS, NOAUTH): every new connection authenticates with what it holds then, so a rotation
// needs no restart and a connection killed after one comes back with the new secret. The secret is never
// logged: errors name the file, never its content.

#include <boost/asio/any_io_executor.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/problem.hpp"
#include "core/watched_file.hpp"

namespace sluice::redis {

struct secret {
  std::string username;  // empty: AUTH <password>
  std::string password;
};

// "password" or "user:password", or what is wrong with the text (which it never quotes).
core::problem parse_secret(const std::string& text, secret& out);
// A file of `<name>=<secret>` lines (REDIS_REMOTE_AUTH_FILE: one per region; blank lines and `#` comments
// skipped): `name`'s secret, or what is wrong (never quoting a secret).
core::problem parse_named_secret(const std::string& text, const std::string& name, secret& out);

class credential_file {
 public:
  // Reads the file now; throws std::runtime_error "<path>: <what is wrong>". `setting` names it in logs
  // (REDIS_AUTH_FILE, ...).
  explicit credential_file(std::string path, std::string setting = {});
  // A file of `<name>=<secret>` lines (parse_named_secret): the secret of `entry`.
  credential_file(std::string path, std::string setting, std::string entry);
  secret current() const;
  // Redis refused the secret: reads the file again now. Whether what it holds changed.
  bool refused();
  void watch(boost::asio::any_io_executor ex);
  void stop();
  const std::string& path() const { return file_.path(); }
  // "REDIS_AUTH_FILE (/etc/redis-secret)": which secret Redis refused, for the log.
  std::string describe() const;

 private:
  std::string setting_;
  mutable std::mutex mutex_;
  secret current_;
  bool changed_ = false;
  core::watched_file file_;
};

}  // namespace sluice::redis
