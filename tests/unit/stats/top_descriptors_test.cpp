#include "stats/top_descriptors.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

using namespace sluice::stats;

namespace {

std::uint64_t count_of(const space_saving& s, std::uint64_t id) {
  for (const auto& it : s.items())
    if (it.id == id) return it.count;
  return 0;
}

void add(space_saving& s, std::uint64_t id, std::uint64_t n = 1) {
  s.add(id, n, [id](std::string& text) { text = "item " + std::to_string(id); });
}

top_key key_of(const std::string& value) {
  top_key k("d", "rule");
  k.add_entry("user", value);
  return k;
}

void hit(top_recorder& r, std::int64_t now, const std::string& value, std::uint64_t n = 1) {
  const auto k = key_of(value);
  r.hit(now, k.id(), n, [&k](std::string& text) { k.describe(text); });
}

}  // namespace

TEST_CASE("space_saving: with room for every item, counts are exact") {
  space_saving s(8);
  std::map<std::uint64_t, std::uint64_t> truth;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 5000; ++i) {
    const std::uint64_t id = rng() % 8;
    const std::uint64_t n = 1 + rng() % 3;
    add(s, id, n);
    truth[id] += n;
  }
  CHECK(s.items().size() == 8);
  CHECK(s.floor() > 0);
  for (const auto& [id, n] : truth) CHECK(count_of(s, id) == n);
}

TEST_CASE("space_saving: over capacity, heavy hitters are kept within the documented error") {
  // Zipf-like traffic over 5,000 ids into 64 counters: each held count is >= the truth and at most
  // truth + floor, and floor <= total / capacity; every id with more than floor hits is held.
  space_saving s(64);
  std::map<std::uint64_t, std::uint64_t> truth;
  std::mt19937_64 rng(11);
  std::uint64_t total = 0;
  for (int i = 0; i < 200'000; ++i) {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    const auto id = static_cast<std::uint64_t>(std::pow(5000.0, u * u * u));  // skewed towards small ids
    add(s, id);
    ++truth[id];
    ++total;
  }
  CHECK(s.total() == total);
  const std::uint64_t floor = s.floor();
  CHECK(floor <= total / 64);
  for (const auto& it : s.items()) {
    CHECK(it.count >= truth[it.id]);
    CHECK(it.count <= truth[it.id] + floor);
    CHECK(it.text == "item " + std::to_string(it.id));
  }
  for (const auto& [id, n] : truth)
    if (n > floor) CHECK(count_of(s, id) >= n);
}

TEST_CASE("space_saving: a new item takes the smallest counter, its text and the index follow") {
  space_saving s(2);
  add(s, 1, 5);
  add(s, 2, 3);
  add(s, 3, 1);  // takes 2's counter: 3 + 1
  CHECK(count_of(s, 2) == 0);
  CHECK(count_of(s, 3) == 4);
  CHECK(s.floor() == 4);
  add(s, 3, 2);
  CHECK(count_of(s, 3) == 6);
  add(s, 2, 1);  // takes 1's counter now (5 < 6)
  CHECK(count_of(s, 1) == 0);
  CHECK(count_of(s, 2) == 6);
  for (const auto& it : s.items()) CHECK(it.text == "item " + std::to_string(it.id));
  s.clear();
  CHECK(s.items().empty());
  CHECK(s.total() == 0);
  add(s, 9);
  CHECK(count_of(s, 9) == 1);
}

TEST_CASE("space_saving: the index survives many evictions (colliding buckets, backward shifts)") {
  // Random ids churning through 16 counters: every held id must still be found (its count grows on a
  // repeat instead of taking another counter).
  space_saving s(16);
  std::mt19937_64 rng(3);
  std::vector<std::uint64_t> recent;
  for (int i = 0; i < 50'000; ++i) {
    const std::uint64_t id = rng() % 64;
    add(s, id);
    std::vector<std::uint64_t> ids;
    for (const auto& it : s.items()) ids.push_back(it.id);
    std::sort(ids.begin(), ids.end());
    REQUIRE(std::adjacent_find(ids.begin(), ids.end()) == ids.end());  // never two counters for one id
    REQUIRE(count_of(s, id) >= 1);
  }
}

TEST_CASE("top_recorder: the window is the last six 10-second slots") {
  top_recorder r(16);
  hit(r, 1000, "old", 7);  // slot 100
  hit(r, 1049, "a", 2);    // slot 104
  hit(r, 1055, "a", 3);    // slot 105
  hit(r, 1055, "b", 1);
  auto copy = r.snapshot(1059);  // slots 100..105
  std::map<std::string, std::uint64_t> seen;
  for (const auto& it : copy.hits.items) seen[it.text] = it.count;
  CHECK(seen.size() == 3);
  CHECK(seen["d\x1frule\x1fuser=a"] == 5);
  CHECK(seen["d\x1frule\x1fuser=old"] == 7);
  // At 1060 slot 100 has left the window.
  copy = r.snapshot(1060);
  seen.clear();
  for (const auto& it : copy.hits.items) seen[it.text] = it.count;
  CHECK(seen.size() == 2);
  CHECK(seen.count("d\x1frule\x1fuser=old") == 0);
  CHECK(top_window_seconds(1060) == 51);
  CHECK(top_window_seconds(1069) == 60);
  // A slot reused by a later epoch starts empty.
  hit(r, 1061, "c");  // slot 106 reuses ring place of 100
  copy = r.snapshot(1061);
  for (const auto& it : copy.hits.items) CHECK(it.text != "d\x1frule\x1fuser=old");
  CHECK(copy.over_limit.items.empty());
}

TEST_CASE("merge_top: sums workers, most first, at most n, decodes the parts") {
  top_recorder w0(16), w1(16);
  hit(w0, 500, "x", 4);
  hit(w1, 500, "x", 5);
  hit(w1, 500, "y", 6);
  hit(w0, 500, "z", 1);
  const std::string y = "y";
  const auto k = key_of(y);
  w1.over_limit(500, k.id(), 1, [&k](std::string& text) { k.describe(text); });
  std::vector<top_recorder::copy> copies{w0.snapshot(500), w1.snapshot(500)};
  auto lists = merge_top(copies, 2, 500);
  REQUIRE(lists.hits.size() == 2);
  CHECK(lists.hits[0].entries == std::vector<std::string>{"user=x"});
  CHECK(lists.hits[0].count == 9);
  CHECK(lists.hits[0].domain == "d");
  CHECK(lists.hits[0].rule == "rule");
  CHECK(lists.hits[1].entries == std::vector<std::string>{"user=y"});
  REQUIRE(lists.over_limit.size() == 1);
  CHECK(lists.over_limit[0].count == 1);
  CHECK(lists.window_seconds == 51);
}

TEST_CASE("top_key: long values are cut at a character boundary, and the cut value is the identity") {
  const std::string a = std::string(63, 'a') + "\xc3\xa9" + "tail one";  // é straddles byte 64
  const std::string b = std::string(63, 'a') + "\xc3\xa9" + "tail two";
  bool cut = false;
  CHECK(cut_value(a, cut) == std::string(63, 'a'));
  CHECK(cut);
  CHECK(cut_value("short", cut) == "short");
  CHECK_FALSE(cut);
  CHECK(key_of(a).id() == key_of(b).id());
  CHECK(key_of("a").id() != key_of("b").id());
  std::string text;
  key_of(a).describe(text);
  CHECK(text == "d\x1frule\x1fuser=" + std::string(63, 'a') + "\u2026");
  // Parts are told apart by position: (k, v1) then (k2, v2) differs from the same strings regrouped.
  top_key one("d", "r");
  one.add_entry("a", "bc");
  top_key two("d", "r");
  two.add_entry("ab", "c");
  CHECK(one.id() != two.id());
  // More than eight entries spill out of the inline parts.
  std::vector<std::string> values;
  for (int i = 0; i < 10; ++i) values.push_back(std::to_string(i));
  top_key many("d", "r");
  for (const auto& v : values) many.add_entry("k", v);  // the key holds views: the strings outlive it
  text.clear();
  many.describe(text);
  CHECK(text == "d\x1fr\x1fk=0\x1fk=1\x1fk=2\x1fk=3\x1fk=4\x1fk=5\x1fk=6\x1fk=7\x1fk=8\x1fk=9");
}
