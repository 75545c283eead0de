#pragma once
// A file whose content is applied at start and again after each burst of changes in its directory (editors
// and Kubernetes ConfigMaps replace a file by a rename or a symlink swap, so the directory is watched, not
// the file). A text equal to the one applied last is skipped; a text the owner refuses is logged and changes
// nothing, so a broken edit keeps serving what was loaded before. A failure is logged once: the same failure
// again (same text, or the same read error) after a change elsewhere in the directory is not. Used by the API
// key store and the holiday list.

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/file_watch.hpp"

namespace sluice::core {

class watched_file {
 public:
  // Takes in the file's text, or says what is wrong with it (and changes nothing).
  using apply_fn = std::function<std::optional<std::string>(const std::string& text)>;

  // Applies the file now; throws std::runtime_error "<path>: <what is wrong>".
  watched_file(std::string path, apply_fn apply);
  ~watched_file();
  watched_file(const watched_file&) = delete;
  watched_file& operator=(const watched_file&) = delete;

  // Re-reads the file; on error returns "<path>: <error>" (logged unless the last reload failed the same way)
  // and keeps what was applied before.
  std::optional<std::string> reload();
  void watch(boost::asio::any_io_executor ex,
             std::chrono::milliseconds debounce = std::chrono::milliseconds(100));
  void stop();
  const std::string& path() const { return path_; }

 private:
  std::optional<std::string> load(bool initial);

  std::string path_;
  apply_fn apply_;
  std::mutex mutex_;
  std::string applied_text_;
  // The last failed load: the text read (none if unreadable) and its error.
  struct failure {
    std::optional<std::string> text;
    std::string error;
  };
  std::optional<failure> failed_;
  std::unique_ptr<file_watch> watch_;
};

}  // namespace sluice::core
