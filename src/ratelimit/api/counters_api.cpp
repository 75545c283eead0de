#include "ratelimit/api/counters_api.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <memory>

#include "core/log.hpp"
#include "core/strings.hpp"
#include "ratelimit/api/counters_query.hpp"
#include "ratelimit/api/http_handlers.hpp"
#include "ratelimit/config/unit.hpp"

namespace sluice::ratelimit::api {

namespace asio = boost::asio;
namespace json = boost::json;
namespace http = boost::beast::http;

namespace {

// One worker's call, on its thread: the service may complete on any thread.
asio::awaitable<control_outcome> control_here(service::rate_limit_service& service,
                                              const service::rls_request& request,
                                              service::control_action action, std::uint64_t used) {
  co_return co_await asio::async_initiate<decltype(asio::use_awaitable), void(control_outcome)>(
      [&](auto handler) {
        auto held = std::make_shared<decltype(handler)>(std::move(handler));
        service.control(
            request, action, used,
            [held](const service::service_error* e, std::vector<service::descriptor_state>&& states) {
              control_outcome out;
              if (e != nullptr) out.error = *e;
              out.states = std::move(states);
              auto ex = asio::get_associated_executor(*held);
              asio::dispatch(ex, [held, out = std::move(out)]() mutable { (*held)(std::move(out)); });
            });
      },
      asio::use_awaitable);
}

void add_unsent(std::vector<service::descriptor_state>& into,
                const std::vector<service::descriptor_state>& from) {
  for (std::size_t d = 0; d < into.size() && d < from.size(); ++d) {
    auto& limits = into[d].limits;
    for (std::size_t k = 0; k < limits.size() && k < from[d].limits.size(); ++k) {
      const std::int64_t unsent = from[d].limits[k].unsent;
      if (unsent == 0) continue;
      auto& l = limits[k];
      const std::int64_t used = static_cast<std::int64_t>(l.used) + unsent;
      l.used = used > 0 ? static_cast<std::uint64_t>(used) : 0;
      l.unsent += unsent;
      l.remaining = l.capacity > l.used ? l.capacity - l.used : 0;
    }
  }
}

}  // namespace

json::object limit_json(const service::limit_state& l) {
  json::object o{{"rule", l.rule},
                 {"algorithm", config::algorithm_name(l.algorithm)},
                 {"requests_per_unit", l.requests_per_unit},
                 {"unit", config::unit_name(l.unit)},
                 {"used", l.used},
                 {"remaining", l.remaining},
                 {"reset_seconds", l.reset_seconds},
                 {"key", l.key},
                 {"shadow_mode", l.shadow_mode}};
  if (!l.name.empty()) o["name"] = l.name;
  if (l.unit_multiplier != 1) o["unit_multiplier"] = l.unit_multiplier;
  if (!l.time_zone.empty()) o["time_zone"] = l.time_zone;
  if (l.algorithm == config::algorithm::gcra) o["burst"] = l.capacity;
  if (l.unsent != 0) o["unsent"] = l.unsent;
  if (!l.holder_key.empty()) {
    o["holder_key"] = l.holder_key;
    o["holders"] = l.holders;
    if (l.holder) {
      o["holder"] = *l.holder;
      o["holder_slots"] = l.holder_slots;
    }
  }
  return o;
}

asio::awaitable<control_outcome> control_everywhere(const worker_services& workers,
                                                    const service::rls_request& request,
                                                    service::control_action action, std::uint64_t used) {
  // A worker's error ends the call: the workers after it are not changed.
  bool failed = false;
  auto outs = co_await workers.on_each([&](service::rate_limit_service& s,
                                           unsigned worker) -> asio::awaitable<control_outcome> {
    if (failed) co_return control_outcome{};
    // The rule walk is the first worker's (the same rules on each); the others add their unsent hits.
    const auto here =
        worker > 0 && action == service::control_action::explain ? service::control_action::inspect : action;
    auto out = co_await control_here(s, request, here, used);
    failed = out.error.has_value();
    co_return out;
  });
  for (auto& out : outs) {
    if (out.error) co_return std::move(out);
  }
  auto& first = outs.front();
  for (std::size_t i = 1; i < outs.size(); ++i) add_unsent(first.states, outs[i].states);
  co_return std::move(first);
}

namespace {

json::object state_json(const counters_query& q, const service::descriptor_state& d) {
  json::array entries;
  for (const auto& [k, v] : q.entries) entries.emplace_back(core::cat(k, "=", v));
  json::array limits;
  for (const auto& l : d.limits) limits.emplace_back(limit_json(l));
  json::object o{{"domain", q.domain}, {"entries", std::move(entries)}, {"limits", std::move(limits)}};
  if (d.unlimited) o["unlimited"] = true;
  if (d.replaced) o["replaced"] = true;
  return o;
}

std::string used_text(const service::descriptor_state& d) {
  std::string out;
  for (const auto& l : d.limits) {
    if (!out.empty()) out += ", ";
    out += core::cat(l.rule, " ", l.used, "/", l.capacity);
  }
  return out.empty() ? std::string("(no limits)") : out;
}

struct counters_context {
  worker_services workers;
  const admin_tokens* tokens;
  stats::counter& changes;
};

// g++ 12 takes the coroutine frame's sized operator delete for a mismatch with its operator new (GCC bug
// 109224, a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
asio::awaitable<net::http::response> handle_counters(const counters_context& c,
                                                     const net::http::request& req) {
  const auto method = req.method();
  const bool change = method == http::verb::delete_ || method == http::verb::put;
  if (!change && method != http::verb::get && method != http::verb::head) {
    auto res = net::http::json_error(req, http::status::method_not_allowed,
                                     "the counters API takes GET, DELETE and PUT");
    res.set(http::field::allow, "GET, HEAD, DELETE, PUT");
    co_return res;
  }
  auto parsed = parse_counters_query(req.target());
  if (auto* problem = std::get_if<std::string>(&parsed))
    co_return net::http::json_error(req, http::status::bad_request, *problem);
  auto& q = std::get<counters_query>(parsed);
  if (method == http::verb::put && !q.used)
    co_return net::http::json_error(req, http::status::bad_request,
                                    "PUT needs used=N: the hits to leave counted");
  if (method != http::verb::put && q.used)
    co_return net::http::json_error(req, http::status::bad_request, "used is only for PUT");

  std::size_t token_line = 0;
  if (change) {
    if (c.tokens == nullptr)
      co_return net::http::json_error(
          req, http::status::forbidden,
          "changing counters is off: set ADMIN_TOKEN_FILE to a file of bearer tokens");
    std::string problem;
    const auto token = bearer_token(req[http::field::authorization], problem);
    std::optional<std::size_t> line;
    if (token) line = c.tokens->match(*token);
    if (!line) {
      auto res = net::http::json_error(
          req, http::status::unauthorized,
          c.tokens->revoked() ? "ADMIN_TOKEN_FILE was deleted: every token is revoked until the file is back"
          : token             ? "the bearer token is not one of ADMIN_TOKEN_FILE's"
                              : problem);
      res.set(http::field::www_authenticate, "Bearer realm=\"sluice-admin\"");
      co_return res;
    }
    token_line = *line;
  }

  service::rls_request request;
  request.set_domain(q.domain);
  auto* descriptor = request.add_descriptors();
  for (const auto& [k, v] : q.entries) {
    auto* e = descriptor->add_entries();
    e->set_key(k);
    e->set_value(v);
  }
  auto before = co_await control_everywhere(c.workers, request, service::control_action::inspect, 0);
  if (before.error)
    co_return net::http::json_error(req, to_http_status(before.error->kind), before.error->message);
  const auto& state = before.states.at(0);
  if (!state.matched)
    co_return net::http::json_error(
        req, http::status::not_found,
        core::cat("no rule of domain '", q.domain, "' matches descriptor ", descriptor_text(q.entries)));
  if (!change)
    co_return net::http::make_response(req, http::status::ok, "application/json",
                                       json::serialize(state_json(q, state)));
  const std::uint64_t used = q.used.value_or(0);
  auto done = co_await control_everywhere(c.workers, request, service::control_action::overwrite, used);
  if (done.error) co_return net::http::json_error(req, to_http_status(done.error->kind), done.error->message);
  auto after = co_await control_everywhere(c.workers, request, service::control_action::inspect, 0);
  if (after.error)
    co_return net::http::json_error(req, to_http_status(after.error->kind), after.error->message);
  c.changes.inc();
  core::log_warn("counters ", method == http::verb::put ? "set" : "reset", " by the token on line ",
                 token_line, " of ADMIN_TOKEN_FILE: domain '", q.domain, "' descriptor ",
                 descriptor_text(q.entries), ": ", used_text(state), " -> ", used_text(after.states.at(0)));
  co_return net::http::make_response(req, http::status::ok, "application/json",
                                     json::serialize(state_json(q, after.states.at(0))));
}
#pragma GCC diagnostic pop

}  // namespace

net::http::debug_page counters_page(worker_services workers, const admin_tokens* tokens,
                                    stats::store& stats) {
  auto context = std::make_shared<const counters_context>(
      counters_context{std::move(workers), tokens, stats.get_counter("ratelimit.admin.changes")});
  return {
      "/counters",
      "a descriptor's counters (JSON; GET ?domain=D&descriptor=k=v,k2=v2 or &entry=k=v&entry=k2=v2; DELETE "
      "resets and PUT &used=N sets, with a bearer token of ADMIN_TOKEN_FILE)",
      [context](const net::http::request& req) { return handle_counters(*context, req); }};
}

}  // namespace sluice::ratelimit::api
