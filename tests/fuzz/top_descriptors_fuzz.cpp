// libFuzzer: the top descriptors' Space-Saving lists (stats/top_descriptors.hpp) driven by arbitrary input,
// against an exact count kept beside them. The input is a list of operations on 1–3 workers' recorders with a
// capacity of 1–8 counters: a hit or an over-limit answer (a descriptor from 40, a value up to 80 bytes, cut
// at 64, hits 1–16), time moving on (seconds, sometimes past a slot or the whole window), a merged read (n
// 1–50). Checked at every read, per list: at most n entries, most first; each entry's text is its
// descriptor's; its count is within the list's total in the window over the capacity (N / capacity) of the
// exact count; every descriptor whose exact count is above that bound is listed when n allows; counts are
// exact while no worker has seen more descriptors than counters in a slot. (The summary's own invariants, no
// id held twice and the smallest count at most total / capacity, are unit-tested: tests/unit/stats.) The
// bound holds for merged lists as it is: each summary's error is at most its own total / capacity, and the
// window's total is the sum of theirs. Both finds of longer runs (seeds top_descriptors-*) were the lists'
// fault: a value cut at 64 bytes had the id of the value that is its first bytes, so two descriptors shown
// apart were counted as one.
//
// Build and run: scripts/fuzz top_descriptors [seconds]

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "stats/top_descriptors.hpp"

namespace {

using namespace sluice::stats;

struct input {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t at = 0;
  bool done() const { return at >= size; }
  std::uint8_t byte() { return at < size ? data[at++] : 0; }
};

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "top_descriptors_fuzz: %s\n", what);
  std::abort();
}

// One descriptor: rule "r<k % 3>", entries user=<value>.
struct descriptor {
  std::string rule;
  std::string value;
  std::uint64_t id() const {
    top_id id(rule, false);
    id.add_entry("user", value);
    return id.value();
  }
  std::string text() const {
    std::string t;
    top_text_begin(t, "d", rule);
    top_text_entry(t, "user", value);
    return t;
  }
};

// A descriptor as merge_top shows it.
using shown = std::tuple<std::string, std::string, std::vector<std::string>>;

shown shown_of(const descriptor& d) {
  auto e = top_text_decode(d.text());
  return {e.domain, e.rule, e.entries};
}

struct exact {
  // Per 10-second epoch, per kind (0 hits, 1 over-limit): descriptor text -> count; and distinct per worker.
  std::map<std::int64_t, std::map<shown, std::uint64_t>> counts[2];
  std::map<std::pair<std::int64_t, int>, std::set<shown>> distinct[2];  // (epoch, worker)
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  input in{data, size};
  const std::size_t workers = 1 + in.byte() % 3;
  const std::size_t capacity = 1 + in.byte() % 8;
  std::vector<top_recorder> recorders;
  for (std::size_t w = 0; w < workers; ++w) recorders.emplace_back(capacity);
  std::vector<descriptor> descriptors;
  for (int k = 0; k < 40; ++k) descriptors.push_back({"r" + std::to_string(k % 3), "v" + std::to_string(k)});
  exact truth;
  std::int64_t now = 1'795'000'000;

  while (!in.done()) {
    const std::uint8_t op = in.byte();
    switch (op % 8) {
      case 0:
      case 1:
      case 2:
      case 3: {  // a hit, or an over-limit answer
        const int kind = op % 8 == 3 ? 1 : 0;
        const std::size_t worker = in.byte() % workers;
        auto& d = descriptors[in.byte() % descriptors.size()];
        if (in.byte() % 16 == 0) {
          // A new value for it, up to 80 bytes (cut at 64 when shown), possibly not valid UTF-8.
          const std::size_t length = in.byte() % 81;
          d.value.clear();
          for (std::size_t i = 0; i < length; ++i) d.value += static_cast<char>(in.byte());
        }
        const std::uint64_t n = kind == 1 ? 1 : 1 + in.byte() % 16;
        const auto describe = [&d](std::string& text) { text = d.text(); };
        if (kind == 0) {
          recorders[worker].hit(now, d.id(), n, describe);
        } else {
          recorders[worker].over_limit(now, d.id(), n, describe);
        }
        const std::int64_t epoch = now / top_recorder::slot_seconds;
        truth.counts[kind][epoch][shown_of(d)] += n;
        truth.distinct[kind][{epoch, static_cast<int>(worker)}].insert(shown_of(d));
        break;
      }
      case 4:
      case 5:  // time moves on
        now += in.byte() % 4 == 0 ? in.byte() % 80 : in.byte() % 3;
        break;
      default: {  // a merged read
        const std::size_t n = 1 + in.byte() % 50;
        std::vector<const top_recorder*> workers_read;
        for (const auto& r : recorders) workers_read.push_back(&r);
        const auto lists = merge_top(workers_read, n, now);
        if (lists.window_seconds < 51 || lists.window_seconds > 60) fail("window_seconds out of 51..60");
        const std::int64_t epoch = now / top_recorder::slot_seconds;
        for (int kind = 0; kind < 2; ++kind) {
          const auto& got = kind == 0 ? lists.hits : lists.over_limit;
          std::map<shown, std::uint64_t> want;
          std::uint64_t total = 0;
          bool exact_counts = true;
          for (std::int64_t e = epoch - 5; e <= epoch; ++e) {
            auto it = truth.counts[kind].find(e);
            if (it == truth.counts[kind].end()) continue;
            for (const auto& [text, c] : it->second) {
              want[text] += c;
              total += c;
            }
            for (std::size_t w = 0; w < workers; ++w) {
              auto d = truth.distinct[kind].find({e, static_cast<int>(w)});
              if (d != truth.distinct[kind].end() && d->second.size() > capacity) exact_counts = false;
            }
          }
          const std::uint64_t bound = total / capacity;
          if (got.size() > n) fail("more entries than n");
          std::set<shown> listed;
          for (std::size_t i = 0; i < got.size(); ++i) {
            const auto& e = got[i];
            if (i > 0 && got[i - 1].count < e.count) fail("not most first");
            if (e.domain != "d" || e.entries.size() != 1) fail("entry's parts");
            const shown text{e.domain, e.rule, e.entries};
            if (!want.contains(text)) fail("a listed descriptor never counted in the window");
            listed.insert(text);
            const std::uint64_t t = want[text];
            const std::uint64_t diff = e.count > t ? e.count - t : t - e.count;
            if (diff > bound) fail("count off by more than N / capacity");
            if (exact_counts && diff != 0) fail("count not exact with room for every descriptor");
          }
          if (got.size() < n) {
            for (const auto& [text, c] : want)
              if (c > bound && !listed.contains(text)) fail("a heavy hitter is missing");
          }
        }
        break;
      }
    }
  }
  return 0;
}
