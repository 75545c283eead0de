#pragma once
// How a worker reads the limit tables a backend keeps (LIMIT_TABLES_REDIS: the Redis backend answers with
// HGET on the worker's own connections; the hash's name is config::redis_table_key). Part of the backend
// interface, beside limiter::backend: the service never names a backend.

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::ratelimit::limiter {

class table_reader {
 public:
  struct query {
    std::string_view table;
    std::string_view value;
  };
  // Per query the field's content, nullopt when the hash has no such field; or `error` (then `fields` is
  // empty) when Redis could not answer. Called once, on the worker's thread, possibly before read() returns.
  using done_fn =
      std::function<void(const std::string* error, std::vector<std::optional<std::string>>& fields)>;

  virtual ~table_reader() = default;
  // `queries` must stay valid until `done` is called.
  virtual void read(std::span<const query> queries, done_fn done) = 0;
};

}  // namespace sluice::ratelimit::limiter
