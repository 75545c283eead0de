#include "core/watched_file.hpp"

#include <filesystem>
#include <stdexcept>

#include "core/log.hpp"
#include "core/read_file.hpp"
#include "core/strings.hpp"

namespace sluice::core {

watched_file::watched_file(std::string path, apply_fn apply, gone_fn on_gone)
    : path_(std::move(path)), apply_(std::move(apply)), on_gone_(std::move(on_gone)) {
  if (auto error = load(true)) throw std::runtime_error(*error);
}

watched_file::~watched_file() {
  stop();
}

core::problem watched_file::reload() {
  return load(false);
}

core::problem watched_file::load(bool initial) {
  std::lock_guard lock(mutex_);
  auto read = read_file(path_);
  std::error_code ec;
  if (!read && !initial && on_gone_ && !std::filesystem::exists(path_, ec) && !ec) {
    if (!gone_) log_warn(path_, " was deleted: ", on_gone_());
    gone_ = true;
    applied_text_.clear();  // the same text back is news
    failed_.reset();
    return cat(path_, ": the file was deleted");
  }
  // Kept with a failure: the same text failing again is not logged again.
  std::optional<std::string> text;
  if (read) text = std::move(*read);
  std::string error;
  if (!text) {
    error = cat("cannot read the file: ", read.error());
  } else if (!initial && *text == applied_text_) {
    failed_.reset();      // back to what is applied: breaking it again is news
    return std::nullopt;  // another file of the directory changed
  } else if (auto refused = apply_(*text)) {
    error = std::move(*refused);
  }
  if (!error.empty()) {
    error = cat(path_, ": ", error);
    // Any change in the directory reloads: a log file there would otherwise log this again and again.
    const bool repeated = failed_ && failed_->text == text && failed_->error == error;
    if (!initial && !repeated) log_error(error, " (keeping what was loaded before)");
    failed_ = failure{std::move(text), error};
    return error;
  }
  applied_text_ = std::move(*text);
  failed_.reset();
  gone_ = false;
  return std::nullopt;
}

void watched_file::watch(boost::asio::any_io_executor ex, std::chrono::milliseconds debounce) {
  std::filesystem::path path = std::filesystem::absolute(path_);
  std::vector<file_watch::target> targets{{path.parent_path().string(), std::nullopt}};
  watch_ = std::make_unique<file_watch>(std::move(ex), std::move(targets), debounce, [this] { reload(); });
  watch_->start();
  // A change between the first load and the watch would otherwise wait for the next one (an equal text is
  // skipped).
  reload();
}

void watched_file::stop() {
  if (watch_) watch_->stop();
}

}  // namespace sluice::core
