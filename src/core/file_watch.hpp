#pragma once
// Watches directories with inotify on the io_context and reports each burst of changes once (debounced).
// Used for hot reload of rule files: Kubernetes ConfigMap updates (a `..data` symlink swap inside the watched
// directory) and atomic swaps of a root symlink (watched in its parent directory, filtered by name) both show
// up as events here.
//
// Threading: the io_context may run on several threads. Handlers run on a strand made from the executor, and
// every touch of the inotify stream, the timer and the watch table (handlers, start(), stop()) happens under
// one recursive mutex, which is also held while on_change runs. So stop() may be called from any thread,
// including from inside on_change; once it returns, on_change is neither running nor called again. Queued
// handlers hold a shared `guard` and never touch a stopped (or destroyed) watch. Do not destroy the watch
// from inside on_change.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sluice::core {

class file_watch {
 public:
  struct target {
    // A directory. Symlinks are followed when the watch is (re)armed, so after a symlink swap the new target
    // is watched.
    std::string directory;
    // When set, only events about this entry of `directory` count (e.g. the root symlink in its parent).
    std::optional<std::string> only_name;
  };

  // Events that count: write (close after write), create, attribute change (chmod), delete, and moves in or
  // out.
  file_watch(boost::asio::any_io_executor ex, std::vector<target> targets, std::chrono::milliseconds debounce,
             std::function<void()> on_change);
  ~file_watch();
  file_watch(const file_watch&) = delete;
  file_watch& operator=(const file_watch&) = delete;

  // Opens inotify and arms the watches; a target directory that does not exist yet is skipped (a warning is
  // logged) and tried again at every re-arm. Throws std::system_error if inotify itself cannot be opened.
  void start();
  // Stops reading events and cancels a pending debounce; on_change is not called afterwards. Thread-safe;
  // waits for an on_change already running on another thread. The watch cannot be started again.
  void stop();

 private:
  void rearm();
  void read_events();
  void schedule();

  // Shared with queued handlers: the mutex described above and a back pointer that stop() clears.
  struct guard;

  boost::asio::posix::stream_descriptor stream_;
  boost::asio::steady_timer debounce_timer_;
  std::vector<target> targets_;
  std::chrono::milliseconds debounce_;
  std::function<void()> on_change_;
  // Watch descriptor per target, -1 while unwatched. Two targets may share one (same directory by two paths).
  std::vector<int> target_wd_;
  std::vector<char> buffer_;
  bool pending_ = false;
  std::shared_ptr<guard> guard_;
};

}  // namespace sluice::core
