#include "core/file_watch.hpp"

#include <limits.h>
#include <sys/inotify.h>

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/strand.hpp>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>

#include "core/log.hpp"

namespace sluice::core {

struct file_watch::guard {
  // Recursive so that on_change (called with the mutex held) may call stop().
  std::recursive_mutex mutex;
  // Null once stopped: queued handlers then return without touching the (maybe destroyed) watch.
  file_watch* owner = nullptr;
};

namespace {

// IN_ONLYDIR: a target that is not a directory is reported like a missing one instead of silently watched.
constexpr std::uint32_t watch_mask = IN_CLOSE_WRITE | IN_MODIFY | IN_CREATE | IN_ATTRIB | IN_DELETE |
                                     IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
constexpr std::uint32_t self_events = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED;
// Room for many events per read; one event needs at most sizeof(inotify_event) + NAME_MAX + 1.
constexpr std::size_t buffer_size = 16 * (sizeof(inotify_event) + NAME_MAX + 1);

// The nearest existing directory above `path`, and the name in it that leads to `path`.
std::pair<std::string, std::string> nearest_existing_parent(const std::filesystem::path& path) {
  std::filesystem::path child = path.lexically_normal();
  if (!child.has_filename()) child = child.parent_path();  // "a/b/" names b
  for (;;) {
    std::filesystem::path parent = child.parent_path();
    if (parent.empty()) parent = ".";
    std::error_code ec;
    if (std::filesystem::is_directory(parent, ec) || parent == child)
      return {parent.string(), child.filename().string()};
    child = parent;
  }
}

}  // namespace

bool file_watch::counts(int wd, std::uint32_t mask, std::string_view name) const {
  // The kernel dropped events: one of them may have mattered.
  if (mask & IN_Q_OVERFLOW) return true;
  for (std::size_t i = 0; i < targets_.size(); ++i) {
    if (armed_[i].wd != wd) continue;
    // A missing target's stand-in: only the next part of its path coming (or going) counts.
    if (!armed_[i].stand_in.empty()) {
      if ((mask & self_events) || name == armed_[i].next_part) return true;
      continue;
    }
    const auto& only = targets_[i].only_name;
    // The directory itself went away or was moved: a re-arm must find what the path now points to.
    if (mask & self_events) {
      if (!only) return true;
    } else if (!only || *only == name) {
      return true;
    }
  }
  return false;
}

file_watch::file_watch(boost::asio::any_io_executor ex, std::vector<target> targets,
                       std::chrono::milliseconds debounce, std::function<void()> on_change)
    : stream_(boost::asio::make_strand(ex)),
      debounce_timer_(stream_.get_executor()),
      targets_(std::move(targets)),
      debounce_(debounce),
      on_change_(std::move(on_change)),
      armed_(targets_.size()),
      buffer_(buffer_size),
      guard_(std::make_shared<guard>()) {
  guard_->owner = this;
}

file_watch::~file_watch() {
  stop();
}

void file_watch::start() {
  std::lock_guard lock(guard_->mutex);
  if (guard_->owner == nullptr || stream_.is_open()) return;
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "inotify_init1");
  stream_.assign(fd);
  rearm();
  for (std::size_t i = 0; i < targets_.size(); ++i) {
    if (armed_[i].wd < 0 || !armed_[i].stand_in.empty()) continue;
    if (targets_[i].only_name) {
      log_info("watching ", targets_[i].directory, " for changes of ", *targets_[i].only_name);
    } else {
      log_info("watching ", targets_[i].directory, " for changes");
    }
  }
  read_events();
}

void file_watch::stop() {
  std::lock_guard lock(guard_->mutex);
  if (guard_->owner == nullptr) return;
  guard_->owner = nullptr;
  pending_ = false;
  debounce_timer_.cancel();
  // Closing the inotify descriptor drops all its watches and aborts the pending read.
  boost::system::error_code ignored;
  stream_.close(ignored);
}

void file_watch::rearm() {
  const int fd = stream_.native_handle();
  for (std::size_t i = 0; i < targets_.size(); ++i) {
    const auto& directory = targets_[i].directory;
    auto& a = armed_[i];
    // Resolves symlinks now; for a directory already watched it returns the same descriptor.
    int wd = ::inotify_add_watch(fd, directory.c_str(), watch_mask);
    std::string stand_in, next_part;
    if (wd < 0 && errno == ENOENT) {
      std::tie(stand_in, next_part) = nearest_existing_parent(directory);
      wd = ::inotify_add_watch(fd, stand_in.c_str(), watch_mask);
      if (wd >= 0 && (a.stand_in != stand_in || a.next_part != next_part))
        log_warn("cannot watch ", directory, " (it does not exist): watching ", stand_in, " until ",
                 next_part, " appears");
      if (wd < 0) stand_in.clear();
    } else if (wd >= 0 && !a.stand_in.empty()) {
      log_info("watching ", directory, " for changes (it appeared)");
    }
    if (wd < 0) log_warn("cannot watch ", directory, ": ", std::strerror(errno));
    a.stand_in = std::move(stand_in);
    a.next_part = std::move(next_part);
    const int old = std::exchange(a.wd, wd);
    if (old < 0 || old == wd) continue;
    log_debug("watch of ", directory, " moved from descriptor ", old, " to ", wd);
    // Leave the old watch to another target still using it. Removing a watch the kernel already dropped
    // (directory deleted) fails harmlessly.
    if (std::none_of(armed_.begin(), armed_.end(), [old](const armed& other) { return other.wd == old; }))
      ::inotify_rm_watch(fd, old);
  }
}

void file_watch::read_events() {
  stream_.async_read_some(boost::asio::buffer(buffer_),
                          [g = guard_](const boost::system::error_code& ec, std::size_t n) {
                            std::lock_guard lock(g->mutex);
                            file_watch* self = g->owner;
                            if (self == nullptr || ec == boost::asio::error::operation_aborted) return;
                            if (ec) {
                              // Not retried: a persistent error would spin. Reloads stop; serving goes on
                              // with the current rules.
                              log_error("file watch stopped: reading inotify events failed: ", ec.message());
                              return;
                            }
                            bool changed = false;
                            std::size_t offset = 0;
                            // The kernel only returns whole events; each is a header followed by a NUL-padded
                            // name of `len` bytes.
                            while (offset + sizeof(inotify_event) <= n) {
                              inotify_event ev;
                              std::memcpy(&ev, self->buffer_.data() + offset, sizeof ev);
                              const char* name_start = self->buffer_.data() + offset + sizeof ev;
                              offset += sizeof ev + ev.len;
                              if (offset > n) break;
                              std::string_view name(name_start, ::strnlen(name_start, ev.len));
                              log_debug("inotify event wd=", ev.wd, " mask=", ev.mask, " name=", name);
                              changed = changed || self->counts(ev.wd, ev.mask, name);
                            }
                            if (changed) self->schedule();
                            self->read_events();
                          });
}

void file_watch::schedule() {
  // A reload is already due: it will see this change too.
  if (pending_) return;
  pending_ = true;
  debounce_timer_.expires_after(debounce_);
  debounce_timer_.async_wait([g = guard_](const boost::system::error_code& ec) {
    std::lock_guard lock(g->mutex);
    file_watch* self = g->owner;
    if (self == nullptr || ec) return;
    // Cleared first so that events read after this point schedule another call.
    self->pending_ = false;
    // Re-arm before reporting, so that whatever the reload reads is already watched.
    self->rearm();
    try {
      self->on_change_();
    } catch (const std::exception& e) {
      // A failed reload must not take down an io_context thread.
      log_error("file change handler failed: ", e.what());
    }
  });
}

}  // namespace sluice::core
