#pragma once
// The counters API on the debug listener (docs/guides/operate.md#counters-look-at-reset-set): GET /counters
// reads what a descriptor's limits have counted; DELETE resets them; PUT ...&used=N sets them. Reads follow
// the debug listener's exposure; a change needs a token of ADMIN_TOKEN_FILE, is logged at warning level
// (descriptor, old and new values, the token's line) and counted in ratelimit.admin.changes. Each call runs
// on every worker in turn (its rules, its local over-limit cache, its batched counters' unsent hits) and
// answers the state all of them leave.

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/per_worker.hpp"
#include "net/http/debug_pages.hpp"
#include "ratelimit/api/admin_tokens.hpp"
#include "ratelimit/service/service.hpp"
#include "stats/store.hpp"

namespace sluice::ratelimit::api {

// How the API reaches the workers' services (the composition root's view of its per-worker objects).
using worker_services = core::worker_view<service::rate_limit_service>;

// One call of service::rate_limit_service::control on each worker, in turn (throws core::workers_stopped at
// a stop); the states are the first worker's, with every other worker's unsent hits added (batched
// counting). An explanation walks the rules on the first worker only; the others inspect.
struct control_outcome {
  std::optional<service::service_error> error;
  std::vector<service::descriptor_state> states;
};
boost::asio::awaitable<control_outcome> control_everywhere(const worker_services& workers,
                                                           const service::rls_request& request,
                                                           service::control_action action,
                                                           std::uint64_t used);

// `tokens` null: ADMIN_TOKEN_FILE is not set, and changes answer 403.
net::http::debug_page counters_page(worker_services workers, const admin_tokens* tokens, stats::store& stats);

// A limit's state as the counters API and explain write it.
boost::json::object limit_json(const service::limit_state& l);

}  // namespace sluice::ratelimit::api
