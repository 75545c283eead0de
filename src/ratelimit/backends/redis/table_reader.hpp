#pragma once
// Redis limit tables (LIMIT_TABLES_REDIS) read on one worker's connections: HGET ratelimit_limits:<table>
// <value>, one request per value (a cluster routes each table's hash to its node); the requests of one turn
// leave in one write.

#include "ratelimit/limiter/table_reader.hpp"
#include "redis/store.hpp"

namespace sluice::ratelimit::backends::redis {

class redis_table_reader final : public limiter::table_reader {
 public:
  explicit redis_table_reader(sluice::redis::store& store) : store_(store) {}
  void read(std::span<const query> queries, done_fn done) override;

 private:
  sluice::redis::store& store_;
};

}  // namespace sluice::ratelimit::backends::redis
