#pragma once
// One worker's view of the limit tables (docs/guides/tenant-tables.md): the file tables as last published (a
// reload publishes a new table_set, swapped in between two decisions: a file table's lookup takes no lock),
// and the Redis tables' rows in this worker's own cache, read on its connections. A row read is sent to the
// other workers too (share), so a value is read once for all of them and every worker holds the same rows:
// no lock on the decision path.
//
// A Redis row is read on first use and kept for LIMIT_TABLES_REDIS_TTL; then one decision reads it again
// while the others keep the row until the answer. When Redis cannot be read, the row cached (expired or not)
// or else the rule's limit applies, and the value is tried again after a second.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/config/limit_table.hpp"
#include "ratelimit/config/rule_set.hpp"
#include "ratelimit/limiter/table_reader.hpp"
#include "ratelimit/service/redis_table_cache.hpp"
#include "stats/store.hpp"

namespace sluice::ratelimit::service {

// A table's stats: ratelimit.limit_tables.<table>.{rows,hits,misses,loads,failed_loads}.
struct table_counters {
  stats::gauge* rows = nullptr;            // a file's rows; a Redis table's values cached by the workers
  stats::counter* hits = nullptr;          // decisions whose value the table lists
  stats::counter* misses = nullptr;        // decisions that took the rule's limit
  stats::counter* loads = nullptr;         // a file loaded; a Redis value read
  stats::counter* failed_loads = nullptr;  // a bad file (kept out); a Redis value unreadable or bad

  static table_counters make(stats::store& stats, std::string_view table);
};

// The tables as the workers see them, by table_ref::id; published whole by limit_tables_source.
struct table_set {
  std::vector<std::string> names;
  std::vector<std::shared_ptr<const config::limit_table>> files;  // null for a Redis table
  std::vector<table_counters> counters;
};

// Shared by the workers: whether reading Redis tables fails now (its start and end are logged once).
struct redis_tables_health {
  std::atomic<bool> failing{false};
};

class table_lookup {
 public:
  // LIMIT_TABLES_REDIS_TTL. `reader` and `health` may be null without Redis tables. `counts_rows`: this
  // worker's cache keeps the tables' rows gauges (one worker's does: they all hold the same rows).
  table_lookup(std::chrono::milliseconds ttl, limiter::table_reader* reader, redis_tables_health* health,
               bool counts_rows = true, std::size_t max_rows = 1 << 20);
  table_lookup(const table_lookup&) = delete;
  table_lookup& operator=(const table_lookup&) = delete;

  void set_tables(std::shared_ptr<const table_set> tables) { tables_ = std::move(tables); }

  struct answer {
    std::optional<config::table_row> row;  // nullopt: the rule's own limit
    bool fetch = false;                    // a Redis row must be read first (fetch(), then find() again)
  };
  // Counts the table's hit or miss when it answers.
  answer find(config::table_ref ref, std::string_view value);

  struct wanted {
    config::table_ref ref;
    std::string_view value;  // valid until `done`
  };
  // Reads the Redis rows of `items` into the cache, then calls `done` (on this thread, maybe at once).
  void fetch(std::span<const wanted> items, std::function<void()> done);

  // Sends a row read here to the other workers' learn() (set once, before the workers run).
  using share_row =
      std::function<void(std::uint32_t table, std::string_view value, const redis_table_cache::cached&)>;
  void set_share(share_row share) { share_ = std::move(share); }
  // A row another worker read.
  void learn(std::uint32_t table, std::string_view value, const redis_table_cache::cached& row);

 private:
  const table_counters* counters(std::uint32_t id) const;
  stats::gauge* rows_gauge(std::uint32_t id) const;
  void answered(std::span<const wanted> items, const std::string* error,
                std::vector<std::optional<std::string>>& fields);

  std::chrono::milliseconds ttl_;
  limiter::table_reader* reader_;
  redis_tables_health* health_;
  bool counts_rows_;
  redis_table_cache cache_;
  share_row share_;
  std::shared_ptr<const table_set> tables_;
};

}  // namespace sluice::ratelimit::service
