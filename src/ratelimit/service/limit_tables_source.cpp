#include "ratelimit/service/limit_tables_source.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <set>

#include "core/counted.hpp"
#include "core/free_memory.hpp"
#include "core/log.hpp"
#include "core/read_file.hpp"
#include "core/strings.hpp"

namespace sluice::ratelimit::service {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view suffix = ".csv";

// What tells a file's versions apart without reading it (a ConfigMap swap changes the inode behind the name).
std::string signature_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return core::cat(st.st_size, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, ":", st.st_ino);
}

}  // namespace

limit_tables_source::limit_tables_source(limit_tables_settings settings, publish_fn publish,
                                         stats::store& stats)
    : settings_(std::move(settings)), publish_(std::move(publish)), stats_(stats) {}

limit_tables_source::~limit_tables_source() {
  stop();
}

std::uint32_t limit_tables_source::add(std::string name, bool redis) {
  const auto id = static_cast<std::uint32_t>(tables_.size());
  auto& t = tables_.emplace_back();
  t.counters = table_counters::make(stats_, name);
  t.name = name;
  t.redis = redis;
  ids_.emplace(std::move(name), id);
  return id;
}

bool limit_tables_source::load_file(table& t, const std::string& path, std::vector<std::string>& errors) {
  const auto signature = signature_of(path);
  if (!signature.empty() && signature == t.signature) return false;
  t.signature = signature;
  const auto started = std::chrono::steady_clock::now();
  auto content = core::read_file(path);
  try {
    if (!content) throw config::table_error{0, core::cat("cannot be read: ", content.error())};
    auto parsed =
        std::make_shared<const config::limit_table>(config::limit_table::parse(*content, settings_.max_rows));
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    core::log_info("limit table '", t.name, "': ", core::counted(parsed->size(), "row", "rows"), " from ",
                   path, " in ", ms.count(), " ms");
    t.counters.rows->set(static_cast<std::int64_t>(parsed->size()));
    t.counters.loads->inc();
    t.file = std::move(parsed);
    t.redis = false;
    return true;
  } catch (const config::table_error& e) {
    auto where = e.line > 0 ? core::cat(path, ":", e.line) : path;
    errors.push_back(core::cat(where, ": ", e.message));
    t.counters.failed_loads->inc();
    core::log_error("limit table '", t.name, "' not loaded: ", errors.back(), "; ",
                    t.file ? core::cat("its ", core::counted(t.file->size(), "row", "rows"), " in force ",
                                       t.file->size() == 1 ? "is" : "are", " kept")
                           : std::string("rules naming it cannot load"));
    return false;
  }
}

limit_tables_source::load_report limit_tables_source::load() {
  load_report report;
  auto& errors = report.errors;
  if (settings_.directory.empty()) return report;
  std::error_code ec;
  fs::directory_iterator it(settings_.directory, ec), end;
  if (ec) {
    report.folder_read = false;
    errors.push_back(core::cat("cannot read LIMIT_TABLES_DIR ", settings_.directory, ": ", ec.message()));
    core::log_error("limit tables: ", errors.back());
    return report;
  }
  std::unique_lock lock(mutex_);
  bool changed = false;
  bool appeared = false;
  std::set<std::string> seen;
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const std::string file = it->path().filename().string();
    if (!file.ends_with(suffix) || file.starts_with('.') || !it->is_regular_file(ec)) continue;
    std::string name = file.substr(0, file.size() - suffix.size());
    if (!config::is_table_name(name)) {
      core::log_warn("limit tables: ", it->path().string(),
                     " is not a table (a name is made of letters, digits, '_', '-' and '.'); ignored");
      continue;
    }
    seen.insert(name);
    auto found = ids_.find(name);
    const std::uint32_t id = found != ids_.end() ? found->second : add(name, false);
    auto& t = tables_[id];
    const bool had_file = t.file != nullptr;
    if (load_file(t, it->path().string(), errors)) {
      changed = true;
      appeared = appeared || !had_file;
    }
  }
  for (auto& t : tables_) {
    if (t.file && !seen.contains(t.name) && !t.signature.empty()) {
      t.signature.clear();  // logged once; a file that comes back is loaded again
      core::log_warn("limit table '", t.name, "': its file is gone from ", settings_.directory, "; its ",
                     t.file->size(), " rows stay in force");
    }
  }
  if (changed) publish();
  lock.unlock();  // rules loading again ask find()
  // The files' bytes and the parser's scratch (and, once the workers let go, the tables replaced).
  if (changed || !errors.empty()) core::release_free_memory();
  if (appeared && on_new_table_) on_new_table_();
  return report;
}

void limit_tables_source::watch(boost::asio::any_io_executor ex, std::function<void()> on_new_table) {
  if (settings_.directory.empty()) return;
  on_new_table_ = std::move(on_new_table);
  std::vector<core::file_watch::target> targets{{settings_.directory, std::nullopt}};
  watch_ = std::make_unique<core::file_watch>(ex, std::move(targets), settings_.debounce, [this] { load(); });
  watch_->start();
}

void limit_tables_source::stop() {
  if (watch_) watch_->stop();
}

std::optional<config::table_ref> limit_tables_source::find(std::string_view name) {
  std::lock_guard lock(mutex_);
  if (auto it = ids_.find(name); it != ids_.end()) {
    // A file table; a Redis one; or a file that did not load (never Redis in its place).
    const auto& t = tables_[it->second];
    if (t.file) return config::table_ref{it->second, false};
    if (t.redis) return config::table_ref{it->second, true};
    return std::nullopt;
  }
  if (!settings_.redis) return std::nullopt;
  const auto id = add(std::string(name), true);
  publish();  // before the rules naming it reach the workers (posts run in order)
  return config::table_ref{id, true};
}

std::string limit_tables_source::missing(std::string_view name) const {
  if (settings_.directory.empty())
    return "no limit tables are set up (LIMIT_TABLES_DIR or LIMIT_TABLES_REDIS)";
  std::lock_guard lock(mutex_);
  if (auto it = ids_.find(name); it != ids_.end() && !tables_[it->second].file)
    return core::cat("the table's file ", settings_.directory, "/", name, ".csv did not load");
  return core::cat("no table: there is no file ", name, ".csv in LIMIT_TABLES_DIR ", settings_.directory);
}

std::string limit_tables_source::dump() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& [name, id] : ids_) {
    const auto& t = tables_[id];
    if (t.file) {
      out += core::cat("table=", name, " rows=", t.file->size(), " source=", settings_.directory, "/", name,
                       suffix, "\n");
    } else if (t.redis) {
      out += core::cat("table=", name, " rows=", t.counters.rows->value(),
                       " source=redis:", config::redis_table_key(name), "\n");
    }
  }
  return out;
}

void limit_tables_source::publish() {
  auto set = std::make_shared<table_set>();
  for (const auto& t : tables_) {
    set->names.push_back(t.name);
    set->files.push_back(t.redis ? nullptr : t.file);
    set->counters.push_back(t.counters);
  }
  if (publish_) publish_(std::move(set));
}

}  // namespace sluice::ratelimit::service
