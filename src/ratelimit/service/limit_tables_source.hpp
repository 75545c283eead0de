#pragma once
// Where the limit tables come from (docs/guides/tenant-tables.md) and how the workers get them: the files
// <table>.csv of LIMIT_TABLES_DIR, loaded at start-up and again after each burst of changes
// (core::file_watch, as the rules), and (LIMIT_TABLES_REDIS) any other name a rule gives, as a Redis hash
// each worker reads (table_lookup). A changed file is parsed into a new table and swapped in whole; a bad one
// keeps its table in force and is logged with its file and line and counted as a failed load. Each change is
// published to every worker as a new table_set. It is also the table_names rules are loaded against. On the
// control thread (dump() on any).

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_watch.hpp"
#include "ratelimit/config/limit_table.hpp"
#include "ratelimit/config/rule_set.hpp"
#include "ratelimit/service/table_lookup.hpp"
#include "stats/store.hpp"

namespace sluice::ratelimit::service {

struct limit_tables_settings {
  std::string directory;                        // LIMIT_TABLES_DIR; "" for none
  std::size_t max_rows = 10'000'000;            // LIMIT_TABLES_MAX_ROWS
  bool redis = false;                           // LIMIT_TABLES_REDIS
  std::chrono::milliseconds redis_ttl{10'000};  // LIMIT_TABLES_REDIS_TTL
  std::chrono::milliseconds debounce{100};
};

class limit_tables_source final : public config::table_names {
 public:
  using publish_fn = std::function<void(std::shared_ptr<const table_set>)>;

  limit_tables_source(limit_tables_settings settings, publish_fn publish, stats::store& stats);
  ~limit_tables_source() override;

  // Reads the folder: new and changed files are loaded.
  struct load_report {
    bool folder_read = true;          // false: the folder cannot be read (the only error then)
    std::vector<std::string> errors;  // one per bad file: "<path>:<line>: why"
  };
  load_report load();
  // Loads again after each change in the folder; `on_new_table` is called when a file table appeared (rules
  // naming it may load now).
  void watch(boost::asio::any_io_executor ex, std::function<void()> on_new_table);
  void stop();

  std::optional<config::table_ref> find(std::string_view name) override;
  std::string missing(std::string_view name) const override;
  // /rlconfig: "table=<name> rows=<n> source=<file or Redis hash>" per table, by name.
  std::string dump() const override;

 private:
  struct table {
    std::string name;
    bool redis = false;
    std::shared_ptr<const config::limit_table> file;  // the rows in force (file tables)
    std::string signature;                            // of the file last read (size, time, inode)
    table_counters counters;
  };
  std::uint32_t add(std::string name, bool redis);
  // Loads one file when it changed; false when it is bad (the error appended).
  bool load_file(table& t, const std::string& path, std::vector<std::string>& errors);
  void publish();

  limit_tables_settings settings_;
  publish_fn publish_;
  stats::store& stats_;
  mutable std::mutex mutex_;   // tables_ against dump() from another thread
  std::vector<table> tables_;  // by id
  std::map<std::string, std::uint32_t, std::less<>> ids_;
  std::unique_ptr<core::file_watch> watch_;
  std::function<void()> on_new_table_;
};

}  // namespace sluice::ratelimit::service
