#include <doctest/doctest.h>

#include <google/protobuf/struct.pb.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ratelimit/config/directory.hpp"
#include "ratelimit/config/yaml_loader.hpp"
#include "source_paths.hpp"

using namespace sluice::ratelimit::config;
namespace fs = std::filesystem;

namespace {

load_result load_one(const std::string& yaml, sluice::stats::store& stats, std::string name = "test.yaml") {
  std::vector<config_file> files{{std::move(name), yaml}};
  return load_rules(files, false, stats);
}

}  // namespace

TEST_CASE("every config error fixture fails with its expected message, prefixed by the file name") {
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(SLUICE_FIXTURES_DIR)) {
    std::ifstream in(entry.path());
    std::stringstream content;
    content << in.rdbuf();
    std::string text = content.str();
    const std::string marker = "# expect: ";
    REQUIRE_MESSAGE(text.starts_with(marker), entry.path().string());
    std::string expected = text.substr(marker.size(), text.find('\n') - marker.size());
    sluice::stats::store stats;
    auto name = entry.path().filename().string();
    auto result = load_one(text, stats, name);
    CAPTURE(name);
    CHECK(result.rules == nullptr);
    CHECK(result.error.starts_with(name + ": "));
    CHECK_MESSAGE(result.error.find(expected) != std::string::npos, result.error);
    ++checked;
  }
  CHECK(checked >= 20);
}

TEST_CASE("a valid file compiles into domains and descriptors") {
  sluice::stats::store stats;
  auto r = load_one(R"(---
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500
  - key: database
    value: default
    rate_limit:
      unit: Second
      requests_per_unit: 0
  - key: unlimited
    rate_limit:
      unlimited: true
      requests_per_unit: 7
  - key: allowed
  - key: parent
    descriptors:
      - key: child
        value: "wild*"
        shadow_mode: yes
        rate_limit: {unit: WEEK, requests_per_unit: 3, name: wk, replaces: [{name: other}]}
)",
                    stats);
  REQUIRE_MESSAGE(r.rules != nullptr, r.error);
  CHECK(r.warnings.empty());
  const auto* domain = r.rules->find_domain("mongo_cps");
  REQUIRE(domain != nullptr);
  CHECK(r.rules->find_domain("other") == nullptr);
  CHECK(domain->children.size() == 5);
  const auto& users = *domain->children.at("database_users");
  REQUIRE(users.limit);
  CHECK(users.limit->requests_per_unit == 500);
  CHECK(users.limit->unit == unit::second);
  CHECK(users.stats_key == "mongo_cps.database_users");
  CHECK(domain->children.at("database_default")->limit->requests_per_unit == 0);
  CHECK(domain->children.at("unlimited")->limit->unlimited);
  CHECK_FALSE(domain->children.at("allowed")->limit);
  const auto& child = *domain->children.at("parent")->children.at("child_wild*");
  CHECK(child.is_wildcard());
  CHECK(child.shadow_mode);
  CHECK(child.limit->unit == unit::week);
  CHECK(child.limit->name == "wk");
  CHECK(child.limit->replaces == std::vector<std::string>{"other"});
  CHECK(domain->children.at("parent")->wildcard_children.size() == 1);
  CHECK(r.rules->dump() ==
        "mongo_cps.database_default: unit=SECOND requests_per_unit=0, shadow_mode: false, quota_mode: false\n"
        "mongo_cps.database_users: unit=SECOND requests_per_unit=500, shadow_mode: false, quota_mode: false\n"
        "mongo_cps.parent.child_wild*: unit=WEEK requests_per_unit=3, shadow_mode: true, quota_mode: false\n"
        "mongo_cps.unlimited: unit=UNKNOWN requests_per_unit=7, shadow_mode: false, quota_mode: false\n");
  // Per-rule counters exist under upstream's names.
  users.limit->stats.total_hits->add(2);
  CHECK(stats.get_counter("ratelimit.service.rate_limit.mongo_cps.database_users.total_hits").value() == 2);
}

TEST_CASE("a key upstream ignores at the wrong level loads with a warning naming it") {
  sluice::stats::store stats;
  auto r = load_one("domain: d\ndescriptors:\n  - key: k\n    unit: second\n", stats);
  REQUIRE(r.rules != nullptr);
  REQUIRE(r.warnings.size() == 1);
  CHECK(r.warnings[0] == "test.yaml: key 'unit' (line 4) has no meaning in a descriptor and is ignored");
}

TEST_CASE("the same domain in two files: an error unless merging, which adds the descriptors") {
  sluice::stats::store stats;
  std::vector<config_file> files{{"a.yaml", "domain: d\ndescriptors:\n  - key: a\n"},
                                 {"b.yaml", "domain: d\ndescriptors:\n  - key: b\n"}};
  auto strict = load_rules(files, false, stats);
  CHECK(strict.rules == nullptr);
  CHECK(strict.error == "b.yaml: duplicate domain 'd' in config file");

  auto merged = load_rules(files, true, stats);
  REQUIRE(merged.rules != nullptr);
  CHECK(merged.rules->find_domain("d")->children.size() == 2);

  // No deep merge: the same top-level key in both files is still a duplicate.
  std::vector<config_file> clash{{"a.yaml", "domain: d\ndescriptors:\n  - key: a\n"},
                                 {"b.yaml", "domain: d\ndescriptors:\n  - key: a\n"}};
  CHECK(load_rules(clash, true, stats).error == "b.yaml: duplicate descriptor composite key 'd.a'");
}

TEST_CASE("a refused rule set makes no stats and changes no gauge") {
  sluice::stats::store stats;
  std::vector<config_file> good{{"a.yaml",
                                 "domain: d\ndescriptors:\n  - key: k\n"
                                 "    rate_limit: {unit: minute, requests_per_unit: 4}\n"}};
  REQUIRE(load_rules(good, false, stats).rules != nullptr);
  std::vector<config_file> refused{{"a.yaml",
                                    "domain: d\ndescriptors:\n  - key: k\n"
                                    "    rate_limit: {unit: hour, requests_per_unit: 9}\n"},
                                   {"b.yaml",
                                    "domain: e\ndescriptors:\n  - key: k\n"
                                    "    rate_limit: {unit: minute, requests_per_unit: 1}\n"},
                                   {"z.yaml", "domain: z\nfoo: 1\n"}};
  CHECK_FALSE(load_rules(refused, false, stats).error.empty());
  std::vector<std::string> names;
  stats.for_each_counter([&](const std::string& name, const auto&) { names.push_back(name); });
  stats.for_each_gauge([&](const std::string& name, const auto&) { names.push_back(name); });
  CHECK(std::ranges::none_of(names, [](const auto& n) { return n.find(".e.") != std::string::npos; }));
  CHECK(names.size() == 9);  // d.k's seven counters and two gauges
  CHECK(stats.get_gauge("ratelimit.service.rate_limit.d.k.limit").value() == 4);
  CHECK(stats.get_gauge("ratelimit.service.rate_limit.d.k.window_seconds").value() == 60);
}

TEST_CASE("quoted scalars are strings; plain YAML 1.1 scalars are typed as upstream types them") {
  sluice::stats::store stats;
  CHECK(load_one("domain: d\ndescriptors:\n  - key: k\n    value: '1.5'\n", stats).rules != nullptr);
  CHECK(load_one("domain: d\ndescriptors:\n  - key: k\n    value: 42\n", stats).rules != nullptr);
  CHECK(load_one("domain: d\ndescriptors:\n  - key: k\n    value: 1.5\n", stats).rules == nullptr);
  auto hex = load_one(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 0x10}\n", stats);
  REQUIRE(hex.rules != nullptr);
  CHECK(hex.rules->find_domain("d")->children.at("k")->limit->requests_per_unit == 16);
}

TEST_CASE("a document made almost all of alias copies is refused early, as yaml.v2 refuses it") {
  // Anchors in metadata, each holding ten copies of the one before: 233,333 nodes once expanded (under the
  // 1,000,000 bound), all but a few of them copies. Metadata is walked too: it becomes dynamic metadata.
  auto document = [](int copies) {
    std::string yaml =
        "domain: d\ndescriptors:\n  - key: k\n    metadata:\n      anchors:\n        - &r0 {name: n}\n";
    for (int i = 1; i <= 5; ++i) {
      const std::string previous = "*r" + std::to_string(i - 1);
      yaml += "        - &r" + std::to_string(i) + " {name: n, descriptors: [" + previous;
      for (int j = 1; j < copies; ++j) yaml += ", " + previous;
      yaml += "]}\n";
    }
    return yaml + "    rate_limit: {unit: second, requests_per_unit: 1, replaces: [*r5]}\n";
  };
  sluice::stats::store stats;
  CHECK(load_one(document(10), stats).error ==
        "test.yaml: error loading config file: yaml: document contains excessive aliasing");
  // The same anchors each used once are fine.
  CHECK(load_one(document(1), stats).rules != nullptr);
}

TEST_CASE("plain scalars of any length are typed in one pass") {
  // std::regex recursed once per character: 100 KB overflowed the stack.
  sluice::stats::store stats;
  const std::string head = "domain: d\ndescriptors:\n  - key: k\n    value: ";
  CHECK(load_one(head + "2001-01-01T" + std::string(100'000, 'x') + "\n", stats)
            .error.ends_with("' is not a string, an integer or a boolean (quote it to make it a string)"));
  CHECK(load_one(head + "1" + std::string(100'000, '_') + "x\n", stats).rules != nullptr);
  CHECK(load_one(head + "1" + std::string(100'000, '_') + ".5e3\n", stats).rules == nullptr);
}

TEST_CASE("aliases may nest rules up to 256 YAML levels deep; deeper chains are refused before any walk") {
  // Each descriptor is an anchor holding the previous one: two YAML levels (a list, a map) per descriptor.
  auto chain = [](int levels) {
    std::string yaml = "domain: deep\ndescriptors:\n  - &d0 {key: k0}\n";
    for (int i = 1; i < levels; ++i) {
      yaml += "  - &d" + std::to_string(i) + " {key: k" + std::to_string(i) + ", descriptors: [*d" +
              std::to_string(i - 1) + "]}\n";
    }
    return yaml;
  };
  sluice::stats::store stats;
  auto fits = load_one(chain(127), stats);
  REQUIRE_MESSAGE(fits.rules != nullptr, fits.error);
  const descriptor_node* node = fits.rules->find_domain("deep");
  for (int i = 126; i >= 0; --i) node = node->children.at("k" + std::to_string(i)).get();
  CHECK(node->children.empty());
  CHECK(load_one(chain(128), stats).error ==
        "test.yaml: error loading config file: the rules nest deeper than 256 levels");
}

TEST_CASE("rule files are read recursively, skipping Kubernetes '..' entries, and named like upstream") {
  auto root = fs::temp_directory_path() / ("sluice-dir-test-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "config" / "..2024_01_01");
  fs::create_directories(root / "config" / "nested");
  std::ofstream(root / "config" / "..2024_01_01" / "a.yaml") << "domain: a\n";
  fs::create_directory_symlink("..2024_01_01", root / "config" / "..data");
  fs::create_symlink("..data/a.yaml", root / "config" / "a.yaml");
  std::ofstream(root / "config" / "nested" / "b.yaml") << "domain: b\n";
  std::ofstream(root / "config" / ".hidden.yaml") << "domain: hidden\n";

  directory_layout layout{root.string(), "", "config", true, false};
  auto r = read_rule_files(layout.rules_directory(), layout.name_prefix(), false);
  CHECK(r.error.empty());
  REQUIRE(r.files.size() == 3);
  CHECK(r.files[0].name == "config..hidden.yaml");
  CHECK(r.files[1].name == "config.a.yaml");
  CHECK(r.files[1].content == "domain: a\n");
  CHECK(r.files[2].name == "config.nested.b.yaml");

  layout.watch_root = false;
  auto ignoring = read_rule_files(layout.rules_directory(), layout.name_prefix(), true);
  REQUIRE(ignoring.files.size() == 2);
  CHECK(ignoring.files[0].name == "a.yaml");

  auto missing = read_rule_files((root / "nope").string(), "", false);
  CHECK(missing.error.starts_with("cannot read rule directory " + (root / "nope").string()));
  fs::remove_all(root);
}

TEST_CASE("metadata becomes a Struct: maps, lists, numbers, booleans, nulls and strings") {
  sluice::stats::store stats;
  auto loaded = load_one(R"(domain: d
descriptors:
  - key: k
    metadata:
      team: payments
      count: 0x10
      ratio: 1_000.5
      enabled: yes
      none: ~
      when: 2024-01-02
      quoted: "12"
      list: [a, 1, {deep: [true]}]
    rate_limit: {unit: second, requests_per_unit: 1}
)",
                         stats);
  REQUIRE(loaded.rules != nullptr);
  const auto* domain = loaded.rules->find_domain("d");
  const std::array<sluice::ratelimit::config::entry, 1> request{{{"k", "v"}}};
  const auto* node = loaded.rules->get_limit(*domain, request).node;
  REQUIRE(node->metadata != nullptr);
  const auto& f = node->metadata->fields();
  CHECK(f.at("team").string_value() == "payments");
  CHECK(f.at("count").number_value() == 16);
  CHECK(f.at("ratio").number_value() == 1000.5);
  CHECK(f.at("enabled").bool_value());
  CHECK(f.at("none").has_null_value());
  CHECK(f.at("when").string_value() == "2024-01-02");
  CHECK(f.at("quoted").string_value() == "12");
  CHECK(f.at("list")
            .list_value()
            .values(2)
            .struct_value()
            .fields()
            .at("deep")
            .list_value()
            .values(0)
            .bool_value());
}

TEST_CASE("bad metadata is refused naming the value") {
  sluice::stats::store stats;
  auto with = [&](const std::string& metadata) {
    return load_one("domain: d\ndescriptors:\n  - key: k\n    metadata: " + metadata + "\n", stats).error;
  };
  CHECK(with("[1, 2]") == "test.yaml: error parsing metadata: metadata: expected a mapping");
  CHECK(
      with("{a: {b: .inf}}") ==
      "test.yaml: error parsing metadata: metadata.a.b: '.inf' is not a finite number (quote it to make it a "
      "string)");
  CHECK(with("{a: [1, 1e999]}") ==
        "test.yaml: error parsing metadata: metadata.a[1]: '1e999' is not a finite number (quote it to make "
        "it a "
        "string)");
  CHECK(with("{[1]: x}") ==
        "test.yaml: error parsing metadata: metadata: key '' is not a string (quote it to make it one)");
  CHECK(with("{1: x}") ==
        "test.yaml: error parsing metadata: metadata: key '1' is not a string (quote it to make it one)");
  CHECK(with("&a {x: *a}").find("anchor value contains itself") != std::string::npos);
  CHECK(with("{a: {b: 1, b: 2}}") ==
        "test.yaml: error loading config file: mapping key 'b' already defined at line 4");
}
