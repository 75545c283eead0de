#pragma once
// A file whose content is applied at start and again after each burst of changes in its directory (editors
// and Kubernetes ConfigMaps replace a file by a rename or a symlink swap, so the directory is watched, not
// the file). A text equal to the one applied last is skipped; a text the owner refuses is logged and changes
// nothing, so a broken edit keeps serving what was loaded before. A failure is logged once: the same failure
// again (same text, or the same read error) after a change elsewhere in the directory is not. A file deleted
// keeps what was applied too, unless its owner says otherwise (on_gone: ADMIN_TOKEN_FILE fails closed). Used
// by the API key store, the holiday list, the admin tokens and the Redis secrets.

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/file_watch.hpp"
#include "core/problem.hpp"

namespace sluice::core {

class watched_file {
 public:
  // Takes in the file's text, or says what is wrong with it (and changes nothing).
  using apply_fn = std::function<std::optional<std::string>(const std::string& text)>;
  // Called when a reload finds no file at the path (once, until it is back): the owner drops what it applied
  // and returns what that means, logged at warning after "<path> was deleted: ". The file back is applied
  // again, even if its text is the one applied before.
  using gone_fn = std::function<std::string()>;

  // Applies the file now; throws std::runtime_error "<path>: <what is wrong>".
  watched_file(std::string path, apply_fn apply, gone_fn on_gone = {});
  ~watched_file();
  watched_file(const watched_file&) = delete;
  watched_file& operator=(const watched_file&) = delete;

  // Re-reads the file; on error returns "<path>: <error>" (logged unless the last reload failed the same way)
  // and keeps what was applied before.
  core::problem reload();
  void watch(boost::asio::any_io_executor ex,
             std::chrono::milliseconds debounce = std::chrono::milliseconds(100));
  void stop();
  const std::string& path() const { return path_; }

 private:
  core::problem load(bool initial);

  std::string path_;
  apply_fn apply_;
  gone_fn on_gone_;
  bool gone_ = false;  // on_gone_ was called, and the file has not been applied since
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
