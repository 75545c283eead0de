#include "redis/credentials.hpp"

#include "core/strings.hpp"

namespace sluice::redis {

core::problem parse_secret(const std::string& text, secret& out) {
  const auto trimmed = core::trim_space(text);
  if (trimmed.empty()) return std::string("holds no password (expected password or user:password)");
  if (trimmed.find_first_of("\r\n") != std::string_view::npos)
    return std::string("holds more than one line (expected password or user:password)");
  out = {};
  if (const auto colon = trimmed.find(':'); colon != std::string_view::npos) {
    out.username = std::string(trimmed.substr(0, colon));
    out.password = std::string(trimmed.substr(colon + 1));
    if (out.password.empty()) return std::string("holds a user without a password (expected user:password)");
  } else {
    out.password = std::string(trimmed);
  }
  return std::nullopt;
}

core::problem parse_named_secret(const std::string& text, const std::string& name, secret& out) {
  for (const auto& raw : core::split(text, '\n')) {
    const auto line = core::trim_space(raw);
    if (line.empty() || line.front() == '#') continue;
    const auto equals = line.find('=');
    if (equals == std::string_view::npos)
      return std::string("has a line without '=' (expected <region>=<password> lines)");
    if (core::trim_space(line.substr(0, equals)) != name) continue;
    if (auto problem = parse_secret(std::string(line.substr(equals + 1)), out))
      return core::cat("entry ", name, " ", *problem);
    return std::nullopt;
  }
  return core::cat("has no line for ", name, " (expected <region>=<password> lines)");
}

credential_file::credential_file(std::string path, std::string setting)
    : credential_file(std::move(path), std::move(setting), {}) {}

credential_file::credential_file(std::string path, std::string setting, std::string entry)
    : setting_(std::move(setting)),
      file_(std::move(path),
            [this, entry = std::move(entry)](const std::string& text) -> std::optional<std::string> {
              secret next;
              if (auto problem =
                      entry.empty() ? parse_secret(text, next) : parse_named_secret(text, entry, next))
                return problem;
              std::lock_guard lock(mutex_);
              changed_ = true;
              current_ = std::move(next);
              return std::nullopt;
            }) {}

std::string credential_file::describe() const {
  return setting_.empty() ? path() : core::cat(setting_, " (", path(), ")");
}

secret credential_file::current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

bool credential_file::refused() {
  {
    std::lock_guard lock(mutex_);
    changed_ = false;
  }
  file_.reload();  // (a text equal to the one applied is skipped: then nothing changed)
  std::lock_guard lock(mutex_);
  return changed_;
}

void credential_file::watch(boost::asio::any_io_executor ex) {
  file_.watch(std::move(ex));
}

void credential_file::stop() {
  file_.stop();
}

}  // namespace sluice::redis
