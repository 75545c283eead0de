// Rules from the rule directory and an xDS server at once (CONFIG_TYPE=FILE,GRPC_XDS_SOTW): the union served,
// each source's last good rules kept while the other changes or fails, a domain two sources give refused
// naming both (or merged with MERGE_DOMAIN_CONFIG), /rlconfig's sources, and health over the union.

#include "ratelimit/service/rules_source.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "../../support/temp_dir.hpp"

namespace sluice {
namespace {

using ratelimit::config::config_file;
using ratelimit::service::rule_origin;

std::string rule(const std::string& domain, const std::string& key, int requests = 1) {
  return "domain: " + domain + "\ndescriptors:\n  - key: " + key +
         "\n    rate_limit: {unit: minute, requests_per_unit: " + std::to_string(requests) + "}\n";
}

struct sources {
  testing::temp_dir dir{"sluice-sources"};
  stats::store store;
  core::health health;
  std::shared_ptr<const ratelimit::config::rule_set> published;
  int publishes = 0;
  ratelimit::service::rules_source source;

  explicit sources(bool files = true, bool xds = true, bool merge = false, bool health_gate = false)
      : source(
            settings(files, xds, merge, health_gate),
            [this](auto rules) {
              published = std::move(rules);
              ++publishes;
            },
            store, health) {}

  ratelimit::service::rules_source_settings settings(bool files, bool xds, bool merge, bool health_gate) {
    ratelimit::service::rules_source_settings s;
    s.layout.root = dir.path.string();
    s.layout.app_directory.clear();  // the files right in the directory
    s.layout.watch_root = false;
    s.from_files = files;
    s.from_xds = xds;
    s.merge_domain_config = merge;
    s.healthy_with_at_least_one_config_loaded = health_gate;
    return s;
  }
  void write(const std::string& name, const std::string& text) { dir.write(name, text); }
  std::string dump() const { return source.current() ? source.current()->dump() : ""; }
  std::string domains() const {
    std::string out;
    if (source.current())
      for (const auto& d : source.current()->domain_names()) out += d + " ";
    return out;
  }
  double counter(const std::string& name) { return store.get_counter(name).value(); }
};

TEST_CASE("rule sources: the domains of the files and of xDS are served together") {
  sources s;
  s.write("a.yaml", rule("web", "ip"));
  CHECK_FALSE(s.source.load());
  CHECK(s.source.loaded(rule_origin::files));
  CHECK_FALSE(s.source.loaded(rule_origin::xds));
  CHECK(s.domains() == "web ");
  CHECK_FALSE(s.source.apply_xds({{"mesh", rule("mesh", "user", 5)}}));
  CHECK(s.source.loaded(rule_origin::xds));
  CHECK(s.domains() == "mesh web ");
  CHECK(s.published == s.source.current());
  CHECK(s.source.current()->dump_sources() == "domain=mesh source=GRPC_XDS_SOTW\ndomain=web source=FILE\n");
  REQUIRE(s.source.current()->origin("web"));
  CHECK(s.source.current()->origin("web")->file == "a.yaml");
  CHECK(s.source.current()->origin("web")->sources == std::vector<std::string>{"FILE"});
  CHECK(s.source.current()->origin("nothing") == nullptr);
  // The source that did not change is not loaded again: its domains' nodes are shared.
  const auto* web = s.source.current()->find_domain("web");
  CHECK_FALSE(s.source.apply_xds({{"mesh", rule("mesh", "user", 6)}}));
  CHECK(s.source.current()->find_domain("web") == web);
  const auto* mesh = s.source.current()->find_domain("mesh");

  // Each source reloads on its own: the other's rules stay as they were.
  s.write("a.yaml", rule("web", "ip", 7));
  CHECK_FALSE(s.source.load());
  CHECK(s.dump().find("web.ip: unit=MINUTE requests_per_unit=7") != std::string::npos);
  CHECK(s.dump().find("mesh.user: unit=MINUTE requests_per_unit=6") != std::string::npos);
  CHECK(s.source.current()->find_domain("mesh") == mesh);
  CHECK_FALSE(s.source.apply_xds({}));  // xDS now gives nothing: the files' domains alone
  CHECK(s.domains() == "web ");
  CHECK(s.counter("ratelimit.service.config_load_success") == 5);
  CHECK(s.counter("ratelimit.service.config_load_error") == 0);
}

TEST_CASE("rule sources: a domain given by both is refused, naming both, and the rules in force stay") {
  sources s;
  s.write("a.yaml", rule("web", "ip"));
  REQUIRE_FALSE(s.source.load());
  REQUIRE_FALSE(s.source.apply_xds({{"mesh", rule("mesh", "user")}}));
  const auto before = s.source.current();
  const int publishes = s.publishes;

  // An xDS update that brings a domain of the files: the NACK's message.
  auto error = s.source.apply_xds({{"mesh", rule("mesh", "user")}, {"takeover", rule("web", "path")}});
  REQUIRE(error);
  CHECK(
      *error ==
      "domain 'web' is given by both FILE ('a.yaml') and GRPC_XDS_SOTW ('takeover'): a domain comes from one "
      "source unless MERGE_DOMAIN_CONFIG=true");
  CHECK(s.source.current() == before);
  CHECK(s.publishes == publishes);

  // A file change that brings a domain of xDS: refused like a bad reload.
  s.write("b.yaml", rule("mesh", "path"));
  error = s.source.load();
  REQUIRE(error);
  CHECK(*error ==
        "domain 'mesh' is given by both FILE ('b.yaml') and GRPC_XDS_SOTW ('mesh'): a domain comes from one "
        "source unless MERGE_DOMAIN_CONFIG=true");
  CHECK(s.source.current() == before);
  CHECK(s.counter("ratelimit.service.config_load_error") == 2);
  auto reloads = s.source.recent_reloads();
  REQUIRE(reloads.size() == 4);
  CHECK(reloads[0].source == "files");
  CHECK_FALSE(reloads[0].ok);
  CHECK(reloads[1].source == "xDS resources");
  CHECK_FALSE(reloads[1].ok);

  // xDS updates go on with the files in force (not the refused b.yaml).
  CHECK_FALSE(s.source.apply_xds({{"mesh", rule("mesh", "user", 9)}}));
  CHECK(s.domains() == "mesh web ");
  CHECK(s.dump().find("mesh.path") == std::string::npos);
  // Within one source the message is upstream's.
  std::filesystem::remove(s.dir.path / "b.yaml");
  s.write("c.yaml", rule("web", "other"));
  error = s.source.load();
  REQUIRE(error);
  CHECK(*error == "c.yaml: duplicate domain 'web' in config file");
}

TEST_CASE("rule sources: a side refused for a domain comes in once the other gives the domain up") {
  sources s;
  int asked_again = 0;
  s.source.set_xds_retry([&] { ++asked_again; });
  s.write("a.yaml", rule("web", "ip"));
  REQUIRE_FALSE(s.source.load());
  REQUIRE_FALSE(s.source.apply_xds({{"mesh", rule("mesh", "user")}}));

  // Files refused for xDS's domain wait, without being loaded again, while xDS keeps the domain.
  s.write("b.yaml", rule("mesh", "path"));
  REQUIRE(s.source.load());
  REQUIRE_FALSE(s.source.apply_xds({{"mesh", rule("mesh", "user", 3)}}));
  CHECK(s.counter("ratelimit.service.config_load_error") == 1);
  CHECK(s.dump().find("mesh.path") == std::string::npos);
  // They come in once an xDS update gives the domain up (b.yaml no longer on disk by then: they were kept).
  std::filesystem::remove(s.dir.path / "b.yaml");
  REQUIRE_FALSE(s.source.apply_xds({{"other", rule("other", "user")}}));
  CHECK(s.domains() == "mesh other web ");
  CHECK(s.dump().find("mesh.path") != std::string::npos);
  CHECK(s.source.current()->origin("mesh")->sources == std::vector<std::string>{"FILE"});
  CHECK(s.counter("ratelimit.service.config_load_success") == 5);
  CHECK(asked_again == 0);

  // xDS rules refused for the files' domain: the server is asked for them again (a NACK cannot be taken back)
  // once the files give the domain up, not before.
  REQUIRE(s.source.apply_xds({{"other", rule("other", "user")}, {"takeover", rule("web", "k")}}));
  s.write("a.yaml", rule("web", "ip", 2));
  REQUIRE_FALSE(s.source.load());  // still gives web
  CHECK(asked_again == 0);
  std::filesystem::remove(s.dir.path / "a.yaml");
  s.write("c.yaml", rule("mesh", "path"));
  REQUIRE_FALSE(s.source.load());
  CHECK(asked_again == 1);
  REQUIRE_FALSE(s.source.load());
  CHECK(asked_again == 1);  // asked once
  CHECK_FALSE(s.source.apply_xds({{"other", rule("other", "user")}, {"takeover", rule("web", "k")}}));
  CHECK(s.domains() == "mesh other web ");
  CHECK(s.source.current()->origin("web")->file == "takeover");
}

TEST_CASE(
    "rule sources: refused rules change no gauge of the rules in force; accepted ones have their stats") {
  sources s;
  const auto limit = [&](const std::string& rule_key) {
    return s.store.get_gauge("ratelimit.service.rate_limit." + rule_key + ".limit").value();
  };
  s.write("a.yaml", rule("web", "ip", 7));
  REQUIRE_FALSE(s.source.load());
  CHECK(limit("web.ip") == 7);
  REQUIRE(s.source.apply_xds({{"takeover", rule("web", "ip", 100)}}));
  CHECK(limit("web.ip") == 7);
  REQUIRE_FALSE(s.source.apply_xds({{"mesh", rule("mesh", "user", 5)}}));
  CHECK(limit("mesh.user") == 5);
  bool bound = true;
  s.source.current()->for_each_limit(
      [&](std::string_view, const ratelimit::config::descriptor_node&,
          const ratelimit::config::rate_limit& l) { bound = bound && l.stats.total_hits != nullptr; });
  CHECK(bound);
}

TEST_CASE("rule sources: each source failing alone keeps its last good rules and lets the other change") {
  sources s;
  s.write("a.yaml", rule("web", "ip"));
  REQUIRE_FALSE(s.source.load());
  REQUIRE_FALSE(s.source.apply_xds({{"mesh", rule("mesh", "user")}}));

  s.write("a.yaml", "domain: [broken");
  REQUIRE(s.source.load());
  CHECK_FALSE(s.source.apply_xds({{"mesh", rule("mesh", "user")}, {"more", rule("more", "k")}}));
  CHECK(s.domains() == "mesh more web ");  // web: the files in force before the broken edit

  s.source.refuse("resource 0 is not a valid RateLimitConfig message", rule_origin::xds);
  REQUIRE(s.source.apply_xds(
      {{"bad", "domain: mesh\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n"}}));
  s.write("a.yaml", rule("web", "ip", 3));
  CHECK_FALSE(s.source.load());
  CHECK(s.domains() == "mesh more web ");  // mesh, more: the xDS rules in force
  CHECK(s.dump().find("web.ip: unit=MINUTE requests_per_unit=3") != std::string::npos);
  CHECK(s.counter("ratelimit.service.config_load_error") == 3);
}

TEST_CASE("rule sources: MERGE_DOMAIN_CONFIG merges a domain both give, files first whichever changed") {
  sources s(true, true, true);
  REQUIRE_FALSE(s.source.apply_xds({{"mesh", rule("shared", "user", 5)}}));
  s.write("a.yaml", rule("shared", "ip", 2));
  REQUIRE_FALSE(s.source.load());
  CHECK(s.dump() ==
        "shared.ip: unit=MINUTE requests_per_unit=2, shadow_mode: false, quota_mode: false\n"
        "shared.user: unit=MINUTE requests_per_unit=5, shadow_mode: false, quota_mode: false\n");
  CHECK(s.source.current()->dump_sources() == "domain=shared source=FILE,GRPC_XDS_SOTW\n");
  // A rule both give under one key is refused as between two files.
  auto error = s.source.apply_xds({{"mesh", rule("shared", "ip", 9)}});
  REQUIRE(error);
  CHECK(error->starts_with("mesh: "));
  // xDS gives the domain up: the files' own rules, kept beside the merge, come in with their stats.
  REQUIRE_FALSE(s.source.apply_xds({{"mesh", rule("other", "user", 5)}}));
  CHECK(s.source.current()->dump_sources() ==
        "domain=other source=GRPC_XDS_SOTW\ndomain=shared source=FILE\n");
  int limits = 0;
  s.source.current()->for_each_limit([&](std::string_view, const ratelimit::config::descriptor_node&,
                                         const ratelimit::config::rate_limit& l) {
    CHECK(l.stats.total_hits != nullptr);
    ++limits;
  });
  CHECK(limits == 2);
}

TEST_CASE("rule sources: the rule files alone carry no source labels") {
  sources s(true, false);
  s.write("a.yaml", rule("web", "ip"));
  REQUIRE_FALSE(s.source.load());
  CHECK(s.source.current()->dump_sources().empty());
  CHECK(s.source.current()->origin("web")->sources.empty());
}

TEST_CASE("rule sources: one source alone keeps upstream's messages and no source labels") {
  sources s(false, true);
  CHECK(s.source.source_count() == 1);
  auto error = s.source.apply_xds({{"one", rule("mesh", "a")}, {"two", rule("mesh", "b")}});
  REQUIRE(error);
  CHECK(*error == "two: duplicate domain 'mesh' in config file");
  REQUIRE_FALSE(s.source.apply_xds({{"one", rule("mesh", "a")}}));
  CHECK(s.source.current()->dump_sources().empty());
  CHECK(s.source.current()->origin("mesh")->sources.empty());
  CHECK(s.source.current()->origin("mesh")->file == "one");
}

TEST_CASE("rule sources: HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED looks at the union") {
  sources s(true, true, false, true);
  CHECK_FALSE(s.health.healthy());
  REQUIRE_FALSE(s.source.apply_xds({}));  // xDS with no domains, no files yet
  CHECK_FALSE(s.health.healthy());
  s.write("a.yaml", rule("web", "ip"));
  REQUIRE_FALSE(s.source.load());
  CHECK(s.health.healthy());
  REQUIRE_FALSE(s.source.apply_xds({{"mesh", rule("mesh", "user")}}));
  std::filesystem::remove(s.dir.path / "a.yaml");
  REQUIRE_FALSE(s.source.load());
  CHECK(s.health.healthy());  // mesh still
  REQUIRE_FALSE(s.source.apply_xds({}));
  CHECK_FALSE(s.health.healthy());
}

TEST_CASE("rule files: events that leave the files as they were load nothing (one load per ConfigMap swap)") {
  sources s(true, false);
  s.write("a.yaml", rule("web", "ip", 5));
  REQUIRE_FALSE(s.source.load());
  REQUIRE_FALSE(s.source.load());  // the swap's second burst of events: the same files
  CHECK(s.counter("ratelimit.service.config_load_success") == 1);
  CHECK(s.publishes == 1);
  s.write("a.yaml", rule("web", "ip", 6));
  REQUIRE_FALSE(s.source.load());
  CHECK(s.counter("ratelimit.service.config_load_success") == 2);
  // After a refused load the same good files come in again.
  s.write("a.yaml", "domain: [");
  CHECK(s.source.load());
  s.write("a.yaml", rule("web", "ip", 6));
  REQUIRE_FALSE(s.source.load());
  CHECK(s.counter("ratelimit.service.config_load_success") == 3);
}

// The gauges the sinks and pages show (hidden ones are left out).
std::set<std::string> shown_gauges(const stats::store& store) {
  std::set<std::string> names;
  store.for_each_gauge([&](const std::string& name, const stats::gauge&) { names.insert(name); });
  return names;
}

TEST_CASE("removed rules: their limit and window gauges go at the reload that removes them (issue 40)") {
  sources s(true, false);
  s.write("a.yaml", rule("web", "ip", 5));
  s.write("b.yaml", rule("api", "user", 7));
  REQUIRE_FALSE(s.source.load());
  const std::string web = "ratelimit.service.rate_limit.web.ip.",
                    api = "ratelimit.service.rate_limit.api.user.";
  auto shown = shown_gauges(s.store);
  CHECK(shown.contains(web + "limit"));
  CHECK(shown.contains(api + "window_seconds"));
  CHECK_FALSE(s.source.removed("web.ip"));

  std::filesystem::remove(s.dir.path / "a.yaml");
  REQUIRE_FALSE(s.source.load());
  shown = shown_gauges(s.store);
  CHECK_FALSE(shown.contains(web + "limit"));
  CHECK_FALSE(shown.contains(web + "window_seconds"));
  CHECK(shown.contains(api + "limit"));
  CHECK(s.source.removed("web.ip"));
  CHECK_FALSE(s.source.removed("api.user"));
  CHECK_FALSE(s.source.removed("web.never_configured"));  // keys from request values are not removed rules
  CHECK(s.store.get_counter(web + "total_hits").value() == 0);  // counters stay, as upstream's

  // A refused reload removes nothing; a rule that comes back shows its (new) limit again.
  s.write("b.yaml", "domain: api\ndescriptors: [");
  CHECK(s.source.load());
  CHECK(shown_gauges(s.store).contains(api + "limit"));
  s.write("a.yaml", rule("web", "ip", 9));
  s.write("b.yaml", rule("api", "user", 7));
  REQUIRE_FALSE(s.source.load());
  CHECK(shown_gauges(s.store).contains(web + "limit"));
  CHECK(s.store.get_gauge(web + "limit").value() == 9);
  CHECK_FALSE(s.source.removed("web.ip"));
}

TEST_CASE(
    "rule sources: the backend's verdict on a limit refuses the load or warns, naming domain and rule") {
  using verdict = ratelimit::service::rules_source::limit_verdict;
  auto check = [](const ratelimit::config::descriptor_node& rule, const ratelimit::config::rate_limit& l) {
    if (l.algorithm == ratelimit::config::algorithm::gcra) return verdict{"no arrival times here", true};
    if (rule.count_only_admitted) return verdict{"all-or-nothing is answered UNAVAILABLE", false};
    return verdict{};
  };
  const std::string warned =
      "domain: web\ndescriptors:\n  - key: ip\n    descriptors:\n      - key: path\n"
      "        count_only_admitted: true\n        rate_limit: {unit: minute, requests_per_unit: 3}\n"
      "      - key: tenant\n        count_only_admitted: true\n        rate_limits:\n"
      "          - {unit: minute, requests_per_unit: 3}\n          - {unit: hour, requests_per_unit: 30}\n";
  const std::string refused =
      "domain: web\ndescriptors:\n  - key: ip\n"
      "    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: gcra}\n";

  stats::store scratch;
  auto loaded = ratelimit::config::load_rules(std::vector<config_file>{{"a.yaml", warned}}, false, scratch);
  REQUIRE(loaded.rules);
  auto review = ratelimit::service::review_limits(*loaded.rules, check);
  CHECK_FALSE(review.refused);
  std::ranges::sort(review.warnings);  // (one per rule, however many limits it has)
  CHECK(review.warnings ==
        std::vector<std::string>{"domain 'web', rule 'ip.path': all-or-nothing is answered UNAVAILABLE",
                                 "domain 'web', rule 'ip.tenant': all-or-nothing is answered UNAVAILABLE"});
  loaded = ratelimit::config::load_rules(std::vector<config_file>{{"a.yaml", refused}}, false, scratch);
  REQUIRE(loaded.rules);
  review = ratelimit::service::review_limits(*loaded.rules, check);
  CHECK(review.refused == "domain 'web', rule 'ip': no arrival times here");

  // In the server: a warned rule loads; a refused one keeps the rules in force.
  sources s;
  s.source.set_limit_check(check);
  s.write("a.yaml", warned);
  CHECK_FALSE(s.source.load());
  CHECK(s.dump().find("web.ip.path: unit=MINUTE requests_per_unit=3") != std::string::npos);
  s.write("a.yaml", refused);
  auto error = s.source.load();
  REQUIRE(error);
  CHECK(error->find("domain 'web', rule 'ip': no arrival times here") != std::string::npos);
  CHECK(s.dump().find("web.ip.path: unit=MINUTE requests_per_unit=3") != std::string::npos);
  CHECK(s.counter("ratelimit.service.config_load_error") == 1);
}

}  // namespace
}  // namespace sluice
