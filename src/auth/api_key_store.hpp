#pragma once
// API keys from API_KEYS_FILE, checked on every request of the echo (and holidays) APIs. Reads take an
// immutable snapshot (no lock); the file is reloaded when it changes, and a bad reload keeps the old keys.
// Keys are kept only as SHA-256 digests and compared in constant time, so response timing reveals nothing
// about how much of a guessed key was right.

#include <array>
#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/problem.hpp"
#include "core/setting.hpp"
#include "core/watched_file.hpp"

namespace sluice::auth {

enum class key_state { unknown, disabled, valid };

struct key_check {
  key_state state = key_state::unknown;
  std::string name;      // the key's name when known
  std::uint64_t id = 0;  // when known: the same for the same key across reloads (from its digest)
};

class api_key_store {
 public:
  // Loads `file`; throws std::runtime_error "<file>: <what is wrong>".
  explicit api_key_store(std::string file);
  api_key_store(const api_key_store&) = delete;
  api_key_store& operator=(const api_key_store&) = delete;

  // Thread-safe.
  key_check lookup(std::string_view key) const;
  std::size_t size() const { return table_.load()->size(); }
  const std::string& file() const { return file_.path(); }

  // Re-reads the file; on error keeps the current keys and returns (and logs) "<file>: <error>".
  core::problem reload() { return file_.reload(); }
  // Reloads after each burst of changes in the file's directory.
  void watch(boost::asio::any_io_executor ex,
             std::chrono::milliseconds debounce = std::chrono::milliseconds(100)) {
    file_.watch(std::move(ex), debounce);
  }
  void stop() { file_.stop(); }

 private:
  struct entry {
    std::array<unsigned char, 32> digest;
    std::string name;
    bool enabled;
  };
  using table = std::vector<entry>;

  // Parses the file's text and swaps in its keys; what is wrong otherwise.
  core::problem apply(const std::string& text);

  std::atomic<std::shared_ptr<const table>> table_;
  core::watched_file file_;  // after table_: constructing it applies the file
};

// The store of API_KEYS_FILE, shared by the echo and holidays APIs (null when the setting is empty); a bad
// file throws core::settings_error "API_KEYS_FILE: <file>: <error>".
std::unique_ptr<api_key_store> open_api_keys(const std::string& file);
// API_KEYS_FILE's declaration: the echo and holidays APIs read it.
inline constexpr core::setting api_keys_file_setting{
    "API_KEYS_FILE", "path", "",
    "the API key file of the echo and holidays APIs; required when they need keys; reloaded when it changes"};

}  // namespace sluice::auth
