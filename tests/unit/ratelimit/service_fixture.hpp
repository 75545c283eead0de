#pragma once
// A complete decision pipeline for unit tests: fake clock, memory backend, limiter and service. Decisions
// complete inline, so decide() returns the response directly.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.hpp"
#include "ratelimit/backends/memory/memory_backend.hpp"
#include "ratelimit/limiter/limiter.hpp"
#include "ratelimit/service/service.hpp"
#include "rules_fixture.hpp"

namespace sluice::test {

using rls_request = ratelimit::service::rls_request;
using rls_response = ratelimit::service::rls_response;
using entries = std::vector<std::pair<std::string, std::string>>;

inline void add_descriptor(rls_request& r, const entries& e) {
  auto* d = r.add_descriptors();
  for (const auto& [k, v] : e) {
    auto* entry = d->add_entries();
    entry->set_key(k);
    entry->set_value(v);
  }
}

inline rls_request make_request(const std::string& domain, std::initializer_list<entries> descriptors,
                                std::uint32_t hits_addend = 0) {
  rls_request r;
  r.set_domain(domain);
  r.set_hits_addend(hits_addend);
  for (const auto& e : descriptors) add_descriptor(r, e);
  return r;
}

struct service_fixture {
  explicit service_fixture(const std::string& yaml, ratelimit::limiter::settings ls = {},
                           ratelimit::service::settings ss = {}, std::int64_t now = 1'000'000'020)
      : clock(now),
        backend(clock, 100'000),
        limiter((ls.expiration_jitter_max_seconds = 0, ls), clock),
        service(ss, limiter, backend, stats) {
    if (!yaml.empty()) service.set_rules(compile_rules(yaml, stats));
  }

  // The response, or the error message when the service refused the request.
  std::pair<rls_response, std::optional<std::string>> try_decide(const rls_request& request) {
    rls_response response;
    std::optional<std::string> error;
    bool called = false;
    service.should_rate_limit(request, response, [&](const ratelimit::service::service_error* e) {
      called = true;
      if (e != nullptr) error = e->message;
    });
    REQUIRE(called);  // the memory backend completes inline
    return {std::move(response), error};
  }

  rls_response decide(const rls_request& request) {
    auto decided = try_decide(request);
    REQUIRE_MESSAGE(!decided.second, *decided.second);
    return std::move(decided.first);
  }

  std::uint64_t counter(const std::string& name) { return stats.get_counter(name).value(); }

  stats::store stats;
  core::fake_clock clock;
  ratelimit::backends::memory::memory_backend backend;
  ratelimit::limiter::limiter limiter;
  ratelimit::service::rate_limit_service service;
};

}  // namespace sluice::test
