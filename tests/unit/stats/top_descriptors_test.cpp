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

// A descriptor d / rule / user=<value>: its id and its text, as the service makes them.
struct key_of {
  explicit key_of(std::string_view value) : value_(value) {}
  std::uint64_t id() const {
    top_id id("d.rule", false);
    id.add_entry("user", value_);
    return id.value();
  }
  void describe(std::string& text) const {
    top_text_begin(text, "d", "rule");
    top_text_entry(text, "user", value_);
  }
  std::string value_;
};

// What a key_of(value) reads back as: "<rule> <entries…>".
std::string shown(const std::string& text) {
  const auto e = top_text_decode(text);
  std::string out = e.domain + " " + e.rule;
  for (const auto& kv : e.entries) out += " " + kv;
  return out;
}

void hit(top_recorder& r, std::int64_t now, const std::string& value, std::uint64_t n = 1) {
  const key_of k(value);
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

// The window's hits of one recorder, read as a reader would: "d rule user=<value>" -> count.
std::map<std::string, std::uint64_t> hits_seen(const top_recorder& r, std::int64_t now) {
  const top_recorder* one[] = {&r};
  std::map<std::string, std::uint64_t> seen;
  for (const auto& e : merge_top(one, 100, now).hits)
    seen[e.domain + " " + e.rule + " " + e.entries.at(0)] = e.count;
  return seen;
}

TEST_CASE("top_recorder: the window is the last six 10-second slots") {
  top_recorder r(16);
  hit(r, 1000, "old", 7);  // slot 100
  hit(r, 1049, "a", 2);    // slot 104
  hit(r, 1055, "a", 3);    // slot 105
  hit(r, 1055, "b", 1);
  auto seen = hits_seen(r, 1059);  // slots 100..105
  CHECK(seen.size() == 3);
  CHECK(seen["d rule user=a"] == 5);
  CHECK(seen["d rule user=old"] == 7);
  // The first step copies counts per slot, unmerged: "a" twice.
  CHECK(r.counts_in_window(1059).hits.size() == 4);
  // At 1060 slot 100 has left the window.
  seen = hits_seen(r, 1060);
  CHECK(seen.size() == 2);
  CHECK(seen.count("d rule user=old") == 0);
  CHECK(top_window_seconds(1060) == 51);
  CHECK(top_window_seconds(1069) == 60);
  // A slot reused by a later epoch starts empty.
  hit(r, 1061, "c");  // slot 106 reuses ring place of 100
  seen = hits_seen(r, 1061);
  CHECK(seen.count("d rule user=old") == 0);
  CHECK(seen["d rule user=c"] == 1);
  CHECK(r.counts_in_window(1061).over_limit.empty());
}

TEST_CASE("top lists in two steps: an id whose text left every slot in between is left out") {
  top_recorder r(1);  // one counter: the next descriptor takes it
  hit(r, 500, "x", 5);
  const top_recorder::counts copies[] = {r.counts_in_window(500)};
  const auto ranking = rank_top(copies, 10);
  hit(r, 500, "y");  // takes x's counter: x's text is gone
  auto texts = texts_wanted(ranking);
  r.find_texts(500, texts);
  CHECK(name_top(ranking, texts, 10, 500).hits.empty());
}

TEST_CASE("merge_top: sums workers, most first, at most n, decodes the parts") {
  top_recorder w0(16), w1(16);
  hit(w0, 500, "x", 4);
  hit(w1, 500, "x", 5);
  hit(w1, 500, "y", 6);
  hit(w0, 500, "z", 1);
  const key_of k("y");
  w1.over_limit(500, k.id(), 1, [&k](std::string& text) { k.describe(text); });
  const top_recorder* workers[] = {&w0, &w1};
  auto lists = merge_top(workers, 2, 500);
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

TEST_CASE("top_id and top_text: long values are cut at a character boundary, the cut value is the identity") {
  const std::string a = std::string(63, 'a') + "\xc3\xa9" + "tail one";  // é straddles byte 64
  const std::string b = std::string(63, 'a') + "\xc3\xa9" + "tail two";
  bool cut = false;
  CHECK(cut_value(a, cut) == std::string(63, 'a'));
  CHECK(cut);
  CHECK(cut_value("short", cut) == "short");
  CHECK_FALSE(cut);
  CHECK(key_of(a).id() == key_of(b).id());
  CHECK(key_of("a").id() != key_of("b").id());
  CHECK(key_of(std::string(64, 'x')).id() != key_of(std::string(63, 'x')).id());
  // A cut value is shown with "…": it is not the value that is its first bytes alone (fuzz find: the two were
  // counted as one descriptor under either's text), nor is a value cut to nothing the empty value.
  CHECK(key_of(std::string(64, 'x') + "y").id() != key_of(std::string(64, 'x')).id());
  CHECK(key_of(std::string(65, '\x80')).id() != key_of("").id());
  CHECK(key_of(std::string(65, '\x80')).id() == key_of(std::string(70, '\x80')).id());
  std::string text;
  key_of(a).describe(text);
  CHECK(shown(text) == "d rule user=" + std::string(63, 'a') + "\u2026");
  // Any byte may be in a value, the parts' separators' included.
  text.clear();
  key_of(std::string("a\x1f\0b=c", 6)).describe(text);
  const auto parts = top_text_decode(text);
  CHECK(parts.domain == "d");
  CHECK(parts.rule == "rule");
  CHECK(parts.entries == std::vector<std::string>{std::string("user=a\x1f\0b=c", 11)});
  // Parts are told apart: ("a", "bc") differs from ("ab", "c"), and the order counts.
  auto id_of = [](std::string_view k1, std::string_view v1, std::string_view k2 = {},
                  std::string_view v2 = {}) {
    top_id id("d.r", false);
    id.add_entry(k1, v1);
    if (!k2.empty()) id.add_entry(k2, v2);
    return id.value();
  };
  CHECK(id_of("a", "bc") != id_of("ab", "c"));
  CHECK(top_id("d", false).value() != top_id("d", true).value());  // a rule's path vs the domain's overrides
  CHECK(id_of("k", "1", "j", "2") != id_of("j", "2", "k", "1"));
  CHECK(id_of("long-key-of-many-bytes", "value-longer-than-8") ==
        id_of("long-key-of-many-bytes", "value-longer-than-8"));
  // Distinct values give distinct ids (no collision among 100,000 of them).
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 100'000; ++i)
    ids.push_back(key_of("10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256)).id());
  std::sort(ids.begin(), ids.end());
  CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
}

TEST_CASE("top_text_entry_hashed: one value one hash, values apart, the value itself nowhere") {
  auto hashed = [](std::string_view key, std::string_view value) {
    std::string text;
    top_text_begin(text, "d", "r");
    top_text_entry_hashed(text, key, value);
    return top_text_decode(text).entries.at(0);
  };
  const auto a = hashed("user", "alice@example.com");
  CHECK(a.size() == std::string("user=#").size() + 12);
  CHECK(a.starts_with("user=#"));
  CHECK(a.find_first_not_of("0123456789abcdef", 6) == std::string::npos);
  CHECK(a.find("alice") == std::string::npos);
  CHECK(hashed("user", "alice@example.com") == a);
  CHECK(hashed("user", "bob@example.com") != a);
  CHECK(hashed("owner", "alice@example.com").substr(6) != a.substr(5));  // the key takes part
  // Values are hashed as shown (cut at 64 bytes): they are one descriptor, one hash.
  CHECK(hashed("user", std::string(64, 'v') + "1") == hashed("user", std::string(64, 'v') + "2"));
}

TEST_CASE("space_saving: counts stop at the largest value instead of wrapping; the heap stays in order") {
  space_saving s(2);
  add(s, 1, UINT64_MAX - 1);
  add(s, 1, 5);
  CHECK(count_of(s, 1) == UINT64_MAX);
  CHECK(s.total() == UINT64_MAX);
  add(s, 2, 3);
  add(s, 3, 1);  // takes the smallest counter: 2's, not 1's
  CHECK(count_of(s, 1) == UINT64_MAX);
  CHECK(count_of(s, 3) == 4);
}

TEST_CASE("top_text: keys are cut like values, at most eight entries then one for the rest") {
  std::string text;
  top_text_begin(text, "d", "r");
  top_text_entry(text, std::string(70, 'k'), "v");
  for (int i = 0; i < 7; ++i) top_text_entry(text, "k", "v");
  top_text_more(text);
  const auto e = top_text_decode(text);
  REQUIRE(e.entries.size() == 9);
  CHECK(e.entries[0] == std::string(64, 'k') + "\u2026=v");
  CHECK(e.entries[8] == "\u2026");
  // The ids follow what is shown: a key past 64 bytes and entries past eight are not told apart.
  top_id a("d.r", false), b("d.r", false);
  a.add_entry(std::string(64, 'k') + "1", "v");
  b.add_entry(std::string(64, 'k') + "2", "v");
  CHECK(a.value() == b.value());
  a.add_more();
  CHECK(a.value() != b.value());
}
