#pragma once
// API keys from API_KEYS_FILE, checked on every request of the echo (and holidays) APIs. Reads take an
// immutable snapshot (no lock); the file is reloaded when it changes, and a bad reload keeps the old keys.
// Keys are kept only as SHA-256 digests and compared in constant time, so response timing reveals nothing
// about how much of a guessed key was right.

#include <array>
#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_watch.hpp"

namespace sluice::auth {

enum class key_state { unknown, disabled, valid };

struct key_check {
  key_state state = key_state::unknown;
  std::string name;  // the key's name when known
};

class api_key_store {
 public:
  // Loads `file`; throws std::runtime_error "<file>: <what is wrong>".
  explicit api_key_store(std::string file);
  ~api_key_store();
  api_key_store(const api_key_store&) = delete;
  api_key_store& operator=(const api_key_store&) = delete;

  // Thread-safe.
  key_check lookup(std::string_view key) const;
  std::size_t size() const { return table_.load()->size(); }
  const std::string& file() const { return file_; }

  // Re-reads the file; on error keeps the current keys and returns (and logs) "<file>: <error>".
  std::optional<std::string> reload();
  // Reloads after each burst of changes in the file's directory (editors and Kubernetes ConfigMaps replace
  // the file by a rename or a symlink swap, so the directory is watched, not the file).
  void watch(boost::asio::any_io_executor ex,
             std::chrono::milliseconds debounce = std::chrono::milliseconds(100));
  void stop();

 private:
  struct entry {
    std::array<unsigned char, 32> digest;
    std::string name;
    bool enabled;
  };
  using table = std::vector<entry>;

  // Reads and swaps in the file's keys; the error (with the file name) otherwise.
  std::optional<std::string> load(bool initial);

  std::string file_;
  std::atomic<std::shared_ptr<const table>> table_;
  std::mutex reload_mutex_;
  std::string loaded_text_;  // what the current table came from: unchanged files are not reloaded
  std::unique_ptr<core::file_watch> watch_;
};

}  // namespace sluice::auth
