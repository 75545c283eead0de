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
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
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

  // Opens inotify and arms the watches. For a target directory that does not exist yet, its nearest existing
  // parent is watched instead, for the creation of the next part of the path: each step toward it re-arms,
  // and its appearing counts as a change (a rule folder made after start-up is loaded). Throws
  // std::system_error if inotify itself cannot be opened.
  void start();
  // Stops reading events and cancels a pending debounce; on_change is not called afterwards. Thread-safe;
  // waits for an on_change already running on another thread. The watch cannot be started again.
  void stop();

 private:
  void rearm();
  // Whether an event (of watch `wd`, about entry `name`) is a change of a target.
  bool counts(int wd, std::uint32_t mask, std::string_view name) const;
  void read_events();
  void schedule();

  // Shared with queued handlers: the mutex described above and a back pointer that stop() clears.
  struct guard;

  boost::asio::posix::stream_descriptor stream_;
  boost::asio::steady_timer debounce_timer_;
  std::vector<target> targets_;
  std::chrono::milliseconds debounce_;
  std::function<void()> on_change_;
  // Per target: its watch descriptor, -1 while unwatched (two targets may share one: the same directory by
  // two paths); and while it does not exist, the parent watched instead and the name awaited in it.
  struct armed {
    int wd = -1;
    std::string stand_in;   // the nearest existing parent, while the target is missing
    std::string next_part;  // the name in it that leads to the target
  };
  std::vector<armed> armed_;
  std::vector<char> buffer_;
  bool pending_ = false;
  std::shared_ptr<guard> guard_;
};

}  // namespace sluice::core
