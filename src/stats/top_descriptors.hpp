#pragma once
// The bounded top-N of descriptors (docs/guides/observe/dashboard.md): over the last minute, the
// descriptors with the most hits and with the most over-limit answers. Each worker counts into its own
// `top_recorder`, on its own thread: no lock and no shared write on the decision path. A reader copies each
// worker's lists on that worker's thread (`snapshot`) and merges the copies (`merge_top`).
//
// Each list is a Space-Saving summary (Metwally, Agrawal, El Abbadi, 2005) of `capacity` counters: an item
// not held takes the smallest counter's place and starts from that count. A held count is never below the
// item's true count and never above it by more than the smallest count, itself at most total / capacity; an
// item not held has at most that smallest count. With no more distinct items than counters, counts are exact.

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sluice::stats {

// Counts stop at the largest value rather than wrap (hits_addend is a 64-bit number a client chooses).
inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

class space_saving {
 public:
  struct item {
    std::uint64_t id = 0;
    std::uint64_t count = 0;
    std::string text;  // what describe() wrote when the item took its counter
  };

  explicit space_saving(std::size_t capacity);

  // Adds n to the item `id`; `describe(std::string&)` writes its text, only when it takes a counter.
  template <typename Describe>
  void add(std::uint64_t id, std::uint64_t n, Describe&& describe) {
    total_ = saturating_add(total_, n);
    const std::uint32_t held = find(id);
    if (held != none) {
      raise(held, n);
      return;
    }
    const std::uint32_t i = take(id, n);
    auto& text = items_[i].text;
    text.clear();
    if (text.capacity() > max_kept_text) text.shrink_to_fit();  // a counter keeps no outsized buffer
    describe(text);
  }

  // The held items, in no particular order.
  std::span<const item> items() const { return items_; }
  // The item `id` when held, else null.
  const item* held(std::uint64_t id) const {
    const std::uint32_t i = find(id);
    return i == none ? nullptr : &items_[i];
  }
  std::uint64_t total() const { return total_; }
  // The smallest held count once every counter is taken (the bound on any count's error), else 0.
  std::uint64_t floor() const;
  void clear();

 private:
  static constexpr std::uint32_t none = UINT32_MAX;
  static constexpr std::size_t max_kept_text = 2048;
  std::uint32_t find(std::uint64_t id) const {
    const std::size_t mask = index_.size() - 1;
    for (std::size_t b = bucket_of(id);; b = (b + 1) & mask) {
      const std::uint32_t slot = index_[b];
      if (slot == 0) return none;
      if (items_[slot - 1].id == id) return slot - 1;
    }
  }
  std::uint32_t take(std::uint64_t id, std::uint64_t n);
  void raise(std::uint32_t i, std::uint64_t n);
  void sift_down(std::uint32_t pos);
  void sift_up(std::uint32_t pos);
  void place(std::uint32_t pos, std::uint32_t i);
  void index_insert(std::uint32_t i);
  void index_erase(std::uint64_t id);
  std::size_t bucket_of(std::uint64_t id) const { return (id * 0x9E3779B97F4A7C15ull) >> shift_; }

  std::size_t capacity_;
  std::uint64_t total_ = 0;
  std::vector<item> items_;
  std::vector<std::uint32_t> heap_;      // item indices, a min-heap by count
  std::vector<std::uint32_t> heap_pos_;  // per item, its place in heap_
  std::vector<std::uint32_t> index_;     // open addressing, linear probing: item index + 1, 0 when empty
  int shift_ = 0;
};

// The two lists of one worker, in 10-second slots: the last six make the window (51 to 60 seconds,
// through the current one).
class top_recorder {
 public:
  static constexpr std::int64_t slot_seconds = 10;
  static constexpr std::size_t slots = 6;

  // `capacity`: counters per list and slot. `hash_values`: descriptors' texts show a hash of each value, not
  // the value (TOP_DESCRIPTORS_VALUES=hash).
  explicit top_recorder(std::size_t capacity, bool hash_values = false);
  bool hash_values() const { return hash_values_; }
  std::size_t capacity() const { return capacity_; }

  // `now`: the decision's wall-clock second.
  template <typename Describe>
  void hit(std::int64_t now, std::uint64_t id, std::uint64_t n, Describe&& describe) {
    slot_at(now).hits.add(id, n, describe);
  }
  template <typename Describe>
  void over_limit(std::int64_t now, std::uint64_t id, std::uint64_t n, Describe&& describe) {
    slot_at(now).over_limit.add(id, n, describe);
  }

  // A reader's first step, on the recorder's thread: every (id, count) of the window's slots, unmerged (a
  // copy with no text: the worker's time is a few nanoseconds per counter).
  struct counts {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> hits, over_limit;
  };
  counts counts_in_window(std::int64_t now) const;
  // The same, one slot (0 to slots - 1) at a time: a reader that hops to the worker once a slot keeps each
  // hop short whatever the capacity (about 8 ns a counter).
  void add_counts(std::int64_t now, std::size_t slot_index, counts& into) const;
  // The second step, on the recorder's thread: the texts of the ids still without one in `texts`, when a slot
  // of the window holds them.
  void find_texts(std::int64_t now, std::unordered_map<std::uint64_t, std::string>& texts) const;

 private:
  struct slot {
    std::int64_t epoch = -1;  // now / slot_seconds of what it holds
    space_saving hits;
    space_saving over_limit;
  };
  slot& slot_at(std::int64_t now) {
    const std::int64_t epoch = (now > 0 ? now : 0) / slot_seconds;
    auto& s = ring_[static_cast<std::size_t>(epoch) % slots];
    if (s.epoch != epoch) start_slot(s, epoch);
    return s;
  }
  static void start_slot(slot& s, std::int64_t epoch);
  bool in_window(const slot& s, std::int64_t now) const;

  std::vector<slot> ring_;
  std::size_t capacity_;
  bool hash_values_;
};

// One descriptor of the merged lists.
struct top_entry {
  std::string domain;
  std::string rule;
  std::vector<std::string> entries;  // "key=value"
  std::uint64_t count = 0;
};

struct top_lists {
  std::int64_t window_seconds = 0;
  std::vector<top_entry> over_limit;
  std::vector<top_entry> hits;
};

// Between the two steps, on the reader's thread: the ids with the most counts over every worker, at most n
// per list (merge_top asks for a few more than it shows, in case one leaves every slot between the steps).
struct top_ranking {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> hits, over_limit;  // (id, count), most first
};
top_ranking rank_top(std::span<const top_recorder::counts> copies, std::size_t n);
// The texts every ranked id needs (filled by find_texts), then the lists: most first (ties in a fixed order),
// at most n; an id whose text no worker had any more is left out.
std::unordered_map<std::uint64_t, std::string> texts_wanted(const top_ranking& ranking);
top_lists name_top(const top_ranking& ranking, const std::unordered_map<std::uint64_t, std::string>& texts,
                   std::size_t n, std::int64_t now);
// How many more than n rank_top keeps.
inline constexpr std::size_t top_ranking_slack = 8;
// Both steps on this thread (tests, and a reader that owns the recorders).
top_lists merge_top(std::span<const top_recorder* const> recorders, std::size_t n, std::int64_t now);
// How far back the window reaches at `now`, in seconds (51 to 60: six slots, the current one through second
// `now`).
std::int64_t top_window_seconds(std::int64_t now);

// Keys and values longer than this are shown cut (at a UTF-8 character boundary), ending in "…"; a descriptor
// shows at most top_max_entries entries, then "…". Both bound a descriptor's text whatever the request sends.
inline constexpr std::size_t top_max_value_bytes = 64;
inline constexpr std::size_t top_max_entries = 8;

// The value as shown: at most top_max_value_bytes, cut at a character boundary. Sets `cut`.
std::string_view cut_value(std::string_view value, bool& cut);

// The identity of a descriptor: a hash of what it matched (the rule's stats key; the domain for a limit
// override) and of its entries (keys and values as shown), seeded per process so that collisions cannot be
// worked out in advance (not a keyed MAC: it runs on every decision). Inline for the same reason.
class top_id {
 public:
  top_id(std::string_view matched, bool override) : hash_(seed ^ static_cast<std::uint64_t>(override)) {
    mix(matched);
  }
  void add_entry(std::string_view key, std::string_view value) {
    mix_shown(key);
    mix_shown(value);
  }
  // More entries than top_max_entries: the ones past it are not shown, and not told apart.
  void add_more() { mix("\x01more"); }
  std::uint64_t value() const { return hash_; }

 private:
  static const std::uint64_t seed;
  // A part as shown: a cut one ends in "…", so it differs from a value that is its first bytes alone (the
  // two were one descriptor, counted together under either's text).
  void mix_shown(std::string_view part) {
    if (part.size() <= top_max_value_bytes) {
      mix(part, false);
      return;
    }
    bool cut = false;
    mix(cut_value(part, cut), true);
  }
  // Eight bytes at a time, the length first (so that "a", "bc" and "ab", "c" differ) with whether it was cut.
  void mix(std::string_view part, bool cut = false) {
    const std::uint64_t length = part.size() | (cut ? std::uint64_t{1} << 63 : 0);
    std::uint64_t h = (hash_ ^ length) * 0x9E3779B97F4A7C15ull;
    const char* p = part.data();
    std::size_t n = part.size();
    for (; n > 8; p += 8, n -= 8) h = step(h, load(p, 8));
    h = step(h, n == 8 ? load(p, 8) : n >= 4 ? load(p, 4) << 32 | load(p + n - 4, 4) : small(p, n));
    hash_ = h;
  }
  static std::uint64_t load(const char* p, std::size_t bytes) {
    std::uint64_t w = 0;
    std::memcpy(&w, p, bytes == 8 ? 8 : 4);
    return w;
  }
  static std::uint64_t small(const char* p, std::size_t n) {
    if (n == 0) return 0;
    const auto byte = [p](std::size_t i) {
      return static_cast<std::uint64_t>(static_cast<unsigned char>(p[i]));
    };
    return byte(0) << 16 | byte(n / 2) << 8 | byte(n - 1);
  }
  static std::uint64_t step(std::uint64_t h, std::uint64_t w) {
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 31);
  }
  std::uint64_t hash_;
};

// A descriptor's text: its domain, rule and "key=value" entries (values as shown), each part with its length.
// Written only when a descriptor takes a counter; read back (count 0) by top_text_decode.
void top_text_begin(std::string& text, std::string_view domain, std::string_view rule);
void top_text_entry(std::string& text, std::string_view key, std::string_view value);
// The entry "…" that stands for the entries past top_max_entries.
void top_text_more(std::string& text);
// The same with the value replaced by "#" and 12 hex digits of an HMAC-SHA-256 of it (as shown: cut) under a
// key made at random per process: one value is always one hash, and the value cannot be told from it.
void top_text_entry_hashed(std::string& text, std::string_view key, std::string_view value);
top_entry top_text_decode(std::string_view text);

}  // namespace sluice::stats
