#include "ratelimit/rlqs/quota_service.hpp"

#include "core/strings.hpp"
#include "net/grpc/call.hpp"
#include "ratelimit/rlqs/quota_stream.hpp"
#include "ratelimit/rlqs/worker_state.hpp"
#include "tracing/propagation.hpp"

namespace sluice::ratelimit::rlqs {

quota_service::quota_service(const settings& s, std::size_t worker, demand_exchange& exchange,
                             const core::clock& clock, stats::store& store, boost::asio::any_io_executor ex)
    : state_(std::make_shared<worker_state>(s, worker, exchange, clock, store, std::move(ex))) {}

quota_service::~quota_service() {
  stop();
}

void quota_service::set_tracer(tracing::tracer* t) {
  state_->tracer = t;
}

void quota_service::add_to(net::grpc::method_table& methods) {
  if (state_->tracer != nullptr) {
    for (auto name : tracing::context_headers) {
      if (!methods.keeps_header(name)) methods.keep_header(std::string(name));
    }
  }
  methods.add(
      "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas",
      [state = state_](const std::shared_ptr<net::grpc::call>& c) {
        const void* connection = c->connection();
        auto it = state->streams_per_connection.find(connection);
        if (it != state->streams_per_connection.end() &&
            it->second >= state->config.max_streams_per_connection) {
          return c->finish(net::grpc::status_code::resource_exhausted,
                           core::cat("at most ", state->config.max_streams_per_connection,
                                     " quota streams per connection (RLQS_MAX_STREAMS_PER_CONNECTION)"));
        }
        std::optional<tracing::span_context> parent;
        if (state->tracer != nullptr && c->kept_headers())
          parent = tracing::extract([&c](std::string_view name) { return c->header(name); });
        c->listen(std::make_shared<quota_stream>(state, connection, parent));
      },
      net::grpc::method_kind::bidi_streaming);
}

void quota_service::set_rules(std::shared_ptr<const config::rule_set> rules) {
  state_->rules = std::move(rules);
  state_->rematch();
}

void quota_service::start() {
  state_->schedule(state_);
}

void quota_service::plan_now() {
  state_->plan();
}

void quota_service::stop() {
  state_->stopped = true;
  state_->timer.cancel();
}

}  // namespace sluice::ratelimit::rlqs
