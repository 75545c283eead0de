#include "ratelimit/backends/redis/table_reader.hpp"

#include <memory>

#include "core/strings.hpp"
#include "ratelimit/config/limit_table.hpp"

namespace sluice::ratelimit::backends::redis {

namespace rd = sluice::redis;

namespace {

// One read in flight: the answers as they come, and the first error.
struct reading {
  std::size_t waiting = 0;
  std::vector<std::optional<std::string>> fields;
  std::string error;
  limiter::table_reader::done_fn done;

  void finish_one() {
    if (--waiting > 0) return;
    if (error.empty()) {
      done(nullptr, fields);
    } else {
      fields.clear();
      done(&error, fields);
    }
  }
};

}  // namespace

void redis_table_reader::read(std::span<const query> queries, done_fn done) {
  auto r = std::make_shared<reading>();
  r->waiting = queries.size() + 1;  // + 1: done is not called before every request is sent
  r->fields.resize(queries.size());
  r->done = std::move(done);
  for (std::size_t i = 0; i < queries.size(); ++i) {
    const std::string key = config::redis_table_key(queries[i].table);
    rd::request encoded;
    encoded.push({"HGET", key, queries[i].value});
    auto request = std::make_shared<rd::pending_request>();
    request->expected_replies = 1;
    request->payload = encoded.release_payload();
    request->done = [this, r, i, key](boost::system::error_code ec, std::vector<rd::value>&& replies) {
      if (ec) {
        if (r->error.empty()) r->error = store_.describe(ec);
      } else if (replies.empty() || replies[0].is_error()) {
        if (r->error.empty())
          r->error = core::cat("HGET ", key, ": ", replies.empty() ? "no reply" : replies[0].text);
      } else if (replies[0].type == rd::value::kind::bulk_string ||
                 replies[0].type == rd::value::kind::simple_string) {
        r->fields[i] = std::move(replies[0].text);
      }
      r->finish_one();
    };
    store_.exec(std::move(request), key);
  }
  r->finish_one();
}

}  // namespace sluice::ratelimit::backends::redis
