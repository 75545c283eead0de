// algorithm: concurrency on the memory backend against a fake clock: slots taken and given back, a refused
// acquisition takes nothing, checks of 0 hits, leases that free lost slots (never early), releases from the
// oldest slices, holders (holder_key), its stats, and what it refuses. scripts/sim runs hours of it.
#include <doctest/doctest.h>

#include <string>

#include "ratelimit/backends/memory/snapshot_file.hpp"
#include "service_fixture.hpp"

using namespace sluice;
using namespace sluice::ratelimit;
using test::make_request;
using test::service_fixture;
using code = test::rls_response;

// Named: unity builds put several test files in one translation unit.
namespace concurrency_test {

namespace {

constexpr std::int64_t second = 1'000'000;
constexpr std::int64_t start = 1'800'000'000 * second;

const char* const rules = R"(domain: ai
descriptors:
  - key: model
    rate_limit: {requests_per_unit: 3, algorithm: concurrency, lease: 10s}
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: concurrency}
)";

struct answer {
  code::Code status;
  std::uint32_t remaining;
  std::int64_t reset;
};

// One descriptor of `entries` with `hits`, given back when `release`: its status.
answer decide(service_fixture& f, const test::entries& entries, std::uint64_t hits, bool release) {
  auto req = make_request("ai", {entries});
  req.mutable_descriptors(0)->mutable_hits_addend()->set_value(hits);
  req.mutable_descriptors(0)->set_is_negative_hits(release);
  const auto r = f.decide(req);
  return {r.statuses(0).code(), r.statuses(0).limit_remaining(),
          r.statuses(0).duration_until_reset().seconds()};
}

answer send(service_fixture& f, std::uint64_t hits, bool release = false, const char* key = "model") {
  return decide(f, {{key, "m"}}, hits, release);
}

std::uint64_t stat(service_fixture& f, const char* name) {
  return f.counter(std::string("ratelimit.service.rate_limit.ai.model.") + name);
}

}  // namespace

TEST_CASE("slots are taken up to the limit; a refused acquisition takes nothing; a release frees one") {
  service_fixture f(rules);
  f.clock.set_micros(start);
  CHECK(send(f, 0).remaining == 3);
  CHECK(send(f, 1).remaining == 2);
  CHECK(send(f, 2).remaining == 0);
  const auto full = send(f, 1);
  CHECK(full.status == code::OVER_LIMIT);
  CHECK(send(f, 0).status == code::OVER_LIMIT);  // a check: no slot free
  CHECK(send(f, 1, true).status == code::OK);    // a request ends
  const auto one = send(f, 0);
  CHECK(one.status == code::OK);
  CHECK(one.remaining == 1);               // the refused acquisition took nothing
  CHECK(send(f, 5, true).remaining == 3);  // more given back than held: all, never below 0
  CHECK(stat(f, "acquired") == 3);
  CHECK(stat(f, "released") == 3);
  CHECK(stat(f, "expired_leases") == 0);
  CHECK(f.counter("ratelimit.service.rate_limit.ai.model.over_limit") == 1);
}

TEST_CASE("a lost release frees its slot once its lease ends, never before; the reset says when") {
  service_fixture f(rules);
  // lease 10 s: slices of 1 s, 10 of them. An acquisition at 0.5 s counts until 11 s.
  f.clock.set_micros(start + second / 2);
  send(f, 3);
  const auto full = send(f, 0);
  CHECK(full.status == code::OVER_LIMIT);
  CHECK(full.reset == 11);  // when the oldest lease held ends
  f.clock.set_micros(start + 10 * second +
                     second / 2);  // the lease (10 s) has passed: still held, within a slice
  CHECK(send(f, 0).status == code::OVER_LIMIT);
  f.clock.set_micros(start + 11 * second);
  CHECK(send(f, 0).remaining == 3);
  CHECK(stat(f, "expired_leases") == 3);
  // The default lease is 10 minutes: slices of 38 s (600 / 16, rounded up), 16 of them.
  f.clock.set_micros(start);
  CHECK(send(f, 1, false, "tenant").remaining == 1);
  f.clock.set_micros(start + 607 * second);
  CHECK(send(f, 0, false, "tenant").remaining == 1);
  f.clock.set_micros(start + 646 * second);
  CHECK(send(f, 0, false, "tenant").remaining == 2);
}

TEST_CASE("releases take the oldest slots: a slot held stays counted; a lost one waits for a quiet lease") {
  service_fixture f(rules);
  // lease 10 s, limit 3. Slot A is taken at 0 s and held; B and C churn every second (acquire, release).
  f.clock.set_micros(start);
  CHECK(send(f, 1).status == code::OK);  // A, held throughout
  for (int i = 1; i <= 30; ++i) {
    f.clock.set_micros(start + i * second);
    CHECK(send(f, 1).status == code::OK);
    CHECK(send(f, 1, true).status == code::OK);
    // A is still held: never more than 2 more may be admitted (releasing the newest slice first left A's
    // count in slice 0, dropped at 11 s: 3 more admitted).
    CHECK(send(f, 0).remaining == 2);
  }
  // A is released, but another release is lost: that slot is freed once the descriptor has been quiet for
  // a lease.
  send(f, 1, true);
  send(f, 1);  // lost
  CHECK(send(f, 0).remaining == 2);
  f.clock.set_micros(start + 30 * second + 11 * second);
  CHECK(send(f, 0).remaining == 3);
}

TEST_CASE("concurrency: its key, and a snapshot that brings its leases back") {
  service_fixture f(rules);
  f.clock.set_micros(start);
  send(f, 2);
  std::size_t seen = 0;
  f.backend.visit_live(
      f.clock.now_seconds(), [](std::string_view, std::uint64_t, std::int64_t) { FAIL("no counter"); },
      [&](std::string_view key, const backends::memory::detail::lease_entry& leases) {
        CHECK(key == "{ai_model_m_}10s_concurrency");
        CHECK(leases.slices.size() == 1);
        CHECK(leases.slices[0].second == 2);
        ++seen;
      });
  CHECK(seen == 1);
  const std::string file = "/tmp/sluice-concurrency-" + std::to_string(::getpid()) + ".bin";
  backends::memory::write_snapshot(f.backend, file, f.clock.now_seconds());
  service_fixture g(rules);
  g.clock.set_micros(start + second);
  CHECK(backends::memory::restore_snapshot(g.backend, file, g.clock.now_seconds()).result.counters == 1);
  std::remove(file.c_str());
  CHECK(send(g, 0).remaining == 1);
}

TEST_CASE("concurrency: what it refuses at load, and in an all-or-nothing request") {
  auto error = [](const std::string& rule) {
    stats::store stats;
    std::vector<config::config_file> files{{"c.yaml", "domain: ai\ndescriptors:\n  - key: k\n" + rule}};
    auto r = config::load_rules(files, false, stats);
    return r.rules ? "" : r.error;
  };
  CHECK(error("    rate_limit: {requests_per_unit: 3, algorithm: concurrency, lease: 1m}\n").empty());
  CHECK(error("    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: concurrency}\n").empty());
  CHECK(error("    rate_limit: {requests_per_unit: 3}\n") == "c.yaml: invalid rate limit unit ''");
  CHECK(error("    rate_limit: {requests_per_unit: 3, algorithm: concurrency, lease: soon}\n") ==
        "c.yaml: lease: 'soon' is not a duration from 1s to 168h (a Go duration such as 10m)");
  CHECK(error("    rate_limit: {requests_per_unit: 3, algorithm: concurrency, lease: 500ms}\n") ==
        "c.yaml: lease: '500ms' is not a duration from 1s to 168h (a Go duration such as 10m)");
  CHECK(error("    rate_limit: {unit: hour, requests_per_unit: 3, lease: 1m}\n") ==
        "c.yaml: lease is only meaningful with algorithm: concurrency");
  CHECK(error("    rate_limit: {unit: hour, unit_multiplier: 2, requests_per_unit: 3, algorithm: "
              "concurrency}\n") ==
        "c.yaml: algorithm concurrency takes no unit_multiplier (it limits requests in flight; the lease "
        "bounds "
        "how long one counts)");
  CHECK(error("    rate_limit: {requests_per_unit: 3, algorithm: concurrency, accounting: usage}\n") ==
        "c.yaml: algorithm concurrency takes no accounting: usage (it limits requests in flight; the lease "
        "bounds "
        "how long one counts)");
  CHECK(error("    count_only_admitted: true\n    rate_limit: {requests_per_unit: 3, algorithm: "
              "concurrency}\n") ==
        "c.yaml: rule 'ai.k': count_only_admitted cannot hold back a concurrency limit (a slot is taken or "
        "not on "
        "its own); choose one");

  CHECK(error("    rate_limit: {requests_per_unit: 3, algorithm: concurrency, holder_key: k}\n").empty());
  CHECK(error("    rate_limit: {requests_per_unit: 3, algorithm: concurrency, holder_key: other}\n") ==
        "c.yaml: rule 'ai.k': holder_key 'other' must name this descriptor's own key 'k' (the request's last "
        "entry names the holder; the counter is the descriptor's without it)");
  CHECK(error("    rate_limit: {unit: hour, requests_per_unit: 3, holder_key: k}\n") ==
        "c.yaml: holder_key is only meaningful with algorithm: concurrency (it names who holds a slot)");
  CHECK(error("    rate_limit: {requests_per_unit: 3, algorithm: concurrency, holder_key: ''}\n") ==
        "c.yaml: holder_key: '' names no entry (give the key of the entry that names each holder)");
  CHECK(error("    detailed_metric: true\n    rate_limit: {requests_per_unit: 3, algorithm: concurrency, "
              "holder_key: k}\n") ==
        "c.yaml: rule 'ai.k': holder_key with detailed_metric would name a stat after every holder's id; "
        "leave it out");

  service::settings ss;
  ss.count_only_admitted = true;
  service_fixture f(rules, {}, ss);
  const auto [response, failure] = f.try_decide(make_request("ai", {{{"model", "m"}}}));
  REQUIRE(failure);
  CHECK(failure->find("algorithm concurrency cannot be counted all-or-nothing") != std::string::npos);
}

namespace {

const char* const holder_rules = R"(domain: ai
descriptors:
  - key: tenant
    descriptors:
      - key: request_id
        rate_limit: {requests_per_unit: 3, algorithm: concurrency, lease: 10s, holder_key: request_id}
)";

answer hold(service_fixture& f, const char* id, std::uint64_t hits = 1, bool release = false,
            const char* tenant = "acme") {
  return decide(f, {{"tenant", tenant}, {"request_id", id}}, hits, release);
}

std::uint64_t holder_stat(service_fixture& f, const char* name) {
  return f.counter(std::string("ratelimit.service.rate_limit.ai.tenant.request_id.") + name);
}

}  // namespace

TEST_CASE("holder_key: a release frees its holder's slots and nothing else; a resend counts once") {
  service_fixture f(holder_rules);
  f.clock.set_micros(start);
  CHECK(hold(f, "a").remaining == 2);
  CHECK(hold(f, "b", 2).remaining == 0);
  const auto refused = hold(f, "c");
  CHECK(refused.status == code::OVER_LIMIT);
  // Envoy sends the refused request's release at stream done: it frees nothing.
  CHECK(hold(f, "c", 1, true).status == code::OK);
  CHECK(hold(f, "d").status == code::OVER_LIMIT);
  // A resend by a holder that holds counts once (and renews its lease).
  CHECK(hold(f, "a").status == code::OK);
  CHECK(hold(f, "b", 2).status == code::OK);
  CHECK(hold(f, "b", 1).status == code::OK);  // fewer: still holds its 2
  // A release frees every slot of its holder, whatever its hits.
  CHECK(hold(f, "b", 1, true).remaining == 2);
  CHECK(hold(f, "b", 1, true).remaining == 2);                        // again: it holds nothing now
  CHECK(hold(f, "tenant-2-only", 3, false, "other").remaining == 0);  // per tenant: another counter
  CHECK(holder_stat(f, "acquired") == 3 + 3);
  CHECK(holder_stat(f, "released") == 2);
  CHECK(holder_stat(f, "unheld_releases") == 2);
  // Its key: the descriptor without the holder's entry, under a name of its own.
  std::vector<std::string> keys;
  f.backend.visit_live(
      f.clock.now_seconds(), [](std::string_view, std::uint64_t, std::int64_t) {},
      [&](std::string_view key, const backends::memory::detail::lease_entry& leases) {
        keys.emplace_back(key);
        CHECK(leases.slices.empty());
      });
  std::sort(keys.begin(), keys.end());
  CHECK(keys == std::vector<std::string>{"{ai_tenant_acme_}10s_concurrency_holders",
                                         "{ai_tenant_other_}10s_concurrency_holders"});
}

TEST_CASE("holder_key: a lost release frees its slots exactly when its lease ends; a resend renews it") {
  service_fixture f(holder_rules);
  f.clock.set_micros(start);
  hold(f, "lost");
  f.clock.set_micros(start + 4 * second);
  hold(f, "long");
  const auto full = hold(f, "x", 1);
  CHECK(full.remaining == 0);
  CHECK(full.reset == 6);  // the oldest lease ("lost") ends at 10 s
  f.clock.set_micros(start + 10 * second - 1);
  CHECK(hold(f, "x", 0).remaining == 0);
  f.clock.set_micros(start + 10 * second);
  CHECK(hold(f, "x", 0).remaining == 1);  // "lost" freed at exactly 10 s; "long" and "x" hold
  CHECK(holder_stat(f, "expired_leases") == 1);
  // "long" renews at 13 s: held until 23 s, not 14 s.
  f.clock.set_micros(start + 13 * second);
  hold(f, "long");
  f.clock.set_micros(start + 22 * second);
  CHECK(hold(f, "y", 0).remaining == 2);  // "x" (from 4 s) has ended; "long" holds
  f.clock.set_micros(start + 23 * second);
  CHECK(hold(f, "y", 0).remaining == 3);
}

TEST_CASE("holder_key: a snapshot brings the holders back") {
  service_fixture f(holder_rules);
  f.clock.set_micros(start);
  hold(f, "a");
  hold(f, "b", 2);
  const std::string file = "/tmp/sluice-holders-" + std::to_string(::getpid()) + ".bin";
  backends::memory::write_snapshot(f.backend, file, f.clock.now_seconds());
  service_fixture g(holder_rules);
  g.clock.set_micros(start + second);
  CHECK(backends::memory::restore_snapshot(g.backend, file, g.clock.now_seconds()).result.counters == 1);
  std::remove(file.c_str());
  CHECK(hold(g, "c").status == code::OVER_LIMIT);
  CHECK(hold(g, "b", 1, true).remaining == 2);  // "b"'s release still finds its two slots
  CHECK(hold(g, "a", 1, true).remaining == 3);
}

}  // namespace concurrency_test
