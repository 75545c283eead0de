#include "ratelimit/service/table_lookup.hpp"

#include <cstring>

#include "core/log.hpp"
#include "core/strings.hpp"

namespace sluice::ratelimit::service {

namespace {

constexpr std::int64_t retry_us = 1'000'000;  // a value Redis could not answer for is asked again after this

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

table_counters table_counters::make(stats::store& stats, std::string_view table) {
  const std::string prefix = core::cat("ratelimit.limit_tables.", stats::sanitize_stat_name(table), ".");
  return {&stats.get_gauge(prefix + "rows"), &stats.get_counter(prefix + "hits"),
          &stats.get_counter(prefix + "misses"), &stats.get_counter(prefix + "loads"),
          &stats.get_counter(prefix + "failed_loads")};
}

table_lookup::table_lookup(options o, limiter::table_reader* reader, redis_tables_health* health)
    : options_(o), reader_(reader), health_(health) {}

table_lookup::~table_lookup() {
  for (const auto& [_, c] : cache_) {
    if (const auto* t = counters(c.table)) t->rows->add(-1);
  }
}

std::string table_lookup::cache_key(std::uint32_t id, std::string_view value) {
  std::string key(sizeof id, '\0');
  std::memcpy(key.data(), &id, sizeof id);
  key += value;
  return key;
}

const table_counters* table_lookup::counters(std::uint32_t id) const {
  return tables_ && id < tables_->counters.size() ? &tables_->counters[id] : nullptr;
}

table_lookup::answer table_lookup::find(config::table_ref ref, std::string_view value) {
  // A table named by rules that came before it reached this worker: the rule's limit, uncounted.
  const auto* stats = counters(ref.id);
  if (stats == nullptr) return {};
  answer a;
  if (ref.redis) {
    const auto it = cache_.find(cache_key(ref.id, value));
    if (it == cache_.end() || it->second.expires_us <= now_us()) {
      if (reader_ != nullptr) return {std::nullopt, true};
      // (no reader: nothing can be read; the rule's limit)
    } else {
      a.row = it->second.row;
    }
  } else if (const auto& table = tables_->files[ref.id]) {
    if (const auto* row = table->find(value)) a.row = *row;
  }
  (a.row ? stats->hits : stats->misses)->inc();
  return a;
}

void table_lookup::store(std::uint32_t id, std::string_view value, std::optional<config::table_row> row,
                         std::int64_t expires_us) {
  auto key = cache_key(id, value);
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    it->second.row = row;
    it->second.expires_us = expires_us;
    return;
  }
  if (cache_.size() >= options_.max_cached) {
    // Expired rows go first; a cache full of live ones starts over (each is read again on its next use).
    const std::int64_t now = now_us();
    auto drop = [&](const auto& kv, bool all) {
      if (!all && kv.second.expires_us > now) return false;
      if (const auto* t = counters(kv.second.table)) t->rows->add(-1);
      return true;
    };
    std::erase_if(cache_, [&](const auto& kv) { return drop(kv, false); });
    if (cache_.size() >= options_.max_cached) std::erase_if(cache_, [&](const auto& kv) { return drop(kv, true); });
  }
  cache_.emplace(std::move(key), cached_row{row, expires_us, id});
  if (const auto* t = counters(id)) t->rows->add(1);
}

void table_lookup::fetch(std::span<const wanted> items, std::function<void()> done) {
  auto tables = tables_;  // its names are the queries' until the answer
  std::vector<limiter::table_reader::query> queries;
  queries.reserve(items.size());
  for (const auto& w : items) queries.push_back({tables->names[w.ref.id], w.value});
  auto shared_queries = std::make_shared<std::vector<limiter::table_reader::query>>(std::move(queries));
  reader_->read(*shared_queries,
                [this, items, tables, shared_queries, done = std::move(done)](
                    const std::string* error, std::vector<std::optional<std::string>>& fields) {
                  answered(items, error, fields);
                  done();
                });
}

void table_lookup::answered(std::span<const wanted> items, const std::string* error,
                            std::vector<std::optional<std::string>>& fields) {
  const std::int64_t now = now_us();
  if (error != nullptr) {
    if (health_ != nullptr && !health_->failing.exchange(true))
      core::log_warn("limit tables: Redis cannot be read (", *error,
                     "): the rows cached, else the rules' own limits, apply until it can");
    for (const auto& w : items) {
      if (const auto* t = counters(w.ref.id)) t->failed_loads->inc();
      const auto it = cache_.find(cache_key(w.ref.id, w.value));
      store(w.ref.id, w.value, it != cache_.end() ? it->second.row : std::nullopt, now + retry_us);
    }
    return;
  }
  if (health_ != nullptr && health_->failing.exchange(false))
    core::log_info("limit tables: Redis can be read again");
  const std::int64_t expires = now + std::chrono::duration_cast<std::chrono::microseconds>(options_.ttl).count();
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& w = items[i];
    const auto* t = counters(w.ref.id);
    std::optional<config::table_row> row;
    if (i < fields.size() && fields[i]) {
      std::string why;
      row = config::parse_table_limit(*fields[i], why);
      if (!row && t != nullptr) {
        // Kept (as the rule's limit) for the TTL: logged once per value and worker in that time.
        t->failed_loads->inc();
        core::log_warn("limit tables: ", limiter::redis_table_key(tables_->names[w.ref.id]), " field '", w.value,
                       "': ", why, "; the rule's own limit applies");
      }
    }
    if (t != nullptr && (row || i >= fields.size() || !fields[i])) t->loads->inc();
    store(w.ref.id, w.value, row, expires);
  }
}

}  // namespace sluice::ratelimit::service
