#include "ratelimit/service/table_lookup.hpp"

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

table_lookup::table_lookup(std::chrono::milliseconds ttl, limiter::table_reader* reader,
                           redis_tables_health* health, bool counts_rows, std::size_t max_rows)
    : ttl_(ttl), reader_(reader), health_(health), counts_rows_(counts_rows), cache_(max_rows) {}

const table_counters* table_lookup::counters(std::uint32_t id) const {
  return tables_ && id < tables_->counters.size() ? &tables_->counters[id] : nullptr;
}

stats::gauge* table_lookup::rows_gauge(std::uint32_t id) const {
  const auto* t = counters(id);
  return counts_rows_ && t != nullptr ? t->rows : nullptr;
}

void table_lookup::learn(std::uint32_t table, std::string_view value, const redis_table_cache::cached& row) {
  cache_.put(table, value, row, rows_gauge(table), now_us());
}

table_lookup::answer table_lookup::find(config::table_ref ref, std::string_view value) {
  // A table named by rules that came before it reached this worker: the rule's limit, uncounted.
  const auto* stats = counters(ref.id);
  if (stats == nullptr) return {};
  answer a;
  if (ref.redis) {
    if (reader_ == nullptr) return {};  // (nothing can be read: the rule's limit)
    const auto* held = cache_.get(ref.id, value);
    if (held == nullptr) return {std::nullopt, true};
    // An expired row is read again by one decision of this worker; its others keep it until the answer (one
    // HGET per TTL and worker at most: the rows the others learnt expire at the same time).
    const std::int64_t now = now_us();
    if (held->expires_us <= now && cache_.claim_refresh(ref.id, value, now, now + retry_us))
      return {std::nullopt, true};
    a.row = held->row;
  } else if (const auto& table = tables_->files[ref.id]) {
    if (const auto* row = table->find(value)) a.row = *row;
  }
  (a.row ? stats->hits : stats->misses)->inc();
  return a;
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
  auto store = [&](const wanted& w, std::optional<config::table_row> row, std::int64_t expires) {
    cache_.put(w.ref.id, w.value, {row, expires}, rows_gauge(w.ref.id), now);
  };
  if (error != nullptr) {
    if (health_ != nullptr && !health_->failing.exchange(true))
      core::log_warn("limit tables: Redis cannot be read (", *error,
                     "): the rows cached, else the rules' own limits, apply until it can");
    for (const auto& w : items) {
      if (const auto* t = counters(w.ref.id)) t->failed_loads->inc();
      const auto* held = cache_.get(w.ref.id, w.value);
      store(w, held != nullptr ? held->row : std::nullopt, now + retry_us);
    }
    return;
  }
  if (health_ != nullptr && health_->failing.exchange(false))
    core::log_info("limit tables: Redis can be read again");
  const std::int64_t expires = now + std::chrono::duration_cast<std::chrono::microseconds>(ttl_).count();
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
        core::log_warn("limit tables: ", config::redis_table_key(tables_->names[w.ref.id]), " field '",
                       w.value, "': ", why, "; the rule's own limit applies");
      }
    }
    if (t != nullptr && (row || i >= fields.size() || !fields[i])) t->loads->inc();
    store(w, row, expires);
    if (share_) share_(w.ref.id, w.value, {row, expires});
  }
}

}  // namespace sluice::ratelimit::service
