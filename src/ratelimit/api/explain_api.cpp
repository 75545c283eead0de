#include "ratelimit/api/explain_api.hpp"

#include <boost/json.hpp>
#include <memory>

#include "core/strings.hpp"
#include "ratelimit/api/http_handlers.hpp"
#include "ratelimit/api/json_codec.hpp"

namespace sluice::ratelimit::api {

namespace asio = boost::asio;
namespace json = boost::json;
namespace http = boost::beast::http;

namespace {

struct explain_context {
  worker_services workers;
};

json::object descriptor_json(const service::rls_request& request, int i,
                             const service::descriptor_state& state) {
  json::array entry_texts;
  for (const auto& e : request.descriptors(i).entries())
    entry_texts.emplace_back(core::cat(e.key(), "=", e.value()));
  json::object o{{"entries", std::move(entry_texts)}};
  json::array limits;
  for (const auto& l : state.limits) limits.emplace_back(limit_json(l));
  const auto& walk = state.walk;
  o["outcome"] = walk.outcome;
  if (walk.override) {
    o["override"] = true;
  } else if (walk.walked) {
    o["rule"] = walk.rule ? json::value(*walk.rule) : json::value(nullptr);
    json::array path;
    for (std::size_t k = 0; k < walk.path.size(); ++k) {
      path.emplace_back(json::object{{"level", k + 1},
                                     {"entry", walk.path[k].entry},
                                     {"rule", walk.path[k].rule},
                                     {"matched_by", walk.path[k].matched_by}});
    }
    o["path"] = std::move(path);
    json::array candidates;
    for (const auto& c : walk.candidates)
      candidates.emplace_back(json::object{{"rule", c.rule}, {"level", c.level}, {"why", c.why}});
    o["candidates"] = std::move(candidates);
    if (!walk.limits_from.empty()) o["limits_from"] = walk.limits_from;
  }
  if (state.unlimited) o["unlimited"] = true;
  if (state.replaced) {
    o["replaced"] = true;
    o["outcome"] = core::cat(o["outcome"].as_string(), "; its limits are replaced by another matched rule's");
  }
  o["limits"] = std::move(limits);
  return o;
}

// g++ 12 takes the coroutine frame's sized operator delete for a mismatch with its operator new (GCC bug
// 109224, a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
asio::awaitable<net::http::response> handle_explain(const explain_context& c, const net::http::request& req) {
  if (req.method() != http::verb::post) {
    auto res = net::http::json_error(req, http::status::method_not_allowed,
                                     "explain takes POST with a /json request as its body");
    res.set(http::field::allow, "POST");
    co_return res;
  }
  service::rls_request request;
  if (auto problem = parse_request_json(req.body(), request))
    co_return net::http::json_error(req, http::status::bad_request, *problem);
  // (the service checks the request as a decision would: an empty domain, key or descriptor list is a 400;
  // no rules loaded, a 503)
  auto states = co_await control_everywhere(c.workers, request, service::control_action::explain, 0);
  if (states.error)
    co_return net::http::json_error(req, to_http_status(states.error->kind), states.error->message);
  json::array descriptors;
  for (int i = 0; i < request.descriptors_size(); ++i)
    descriptors.emplace_back(descriptor_json(request, i, states.states.at(static_cast<std::size_t>(i))));
  json::object body{{"domain", request.domain()}, {"descriptors", std::move(descriptors)}};
  co_return net::http::make_response(req, http::status::ok, "application/json", json::serialize(body));
}
#pragma GCC diagnostic pop

}  // namespace

net::http::debug_page explain_page(worker_services workers) {
  auto context = std::make_shared<const explain_context>(explain_context{std::move(workers)});
  return {"/explain",
          "why a request is limited: POST a /json request; each descriptor's rule, the walk, the nearest "
          "rules that "
          "did not match, the counters (JSON; nothing is counted)",
          [context](const net::http::request& req) { return handle_explain(*context, req); }};
}

}  // namespace sluice::ratelimit::api
