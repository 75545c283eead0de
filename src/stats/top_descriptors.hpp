#pragma once
// The bounded top-N of descriptors (README "Top throttled descriptors"): over the last minute, the
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
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::stats {

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
    total_ += n;
    const std::uint32_t held = find(id);
    if (held != none) {
      raise(held, n);
      return;
    }
    const std::uint32_t i = take(id, n);
    items_[i].text.clear();
    describe(items_[i].text);
  }

  // The held items, in no particular order.
  std::span<const item> items() const { return items_; }
  std::uint64_t total() const { return total_; }
  // The smallest held count once every counter is taken (the bound on any count's error), else 0.
  std::uint64_t floor() const;
  void clear();

 private:
  static constexpr std::uint32_t none = UINT32_MAX;
  std::uint32_t find(std::uint64_t id) const;
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

// The two lists of one worker, in 10-second slots: the last six make the window (50 to 60 seconds back).
class top_recorder {
 public:
  static constexpr std::int64_t slot_seconds = 10;
  static constexpr std::size_t slots = 6;

  // `capacity`: counters per list and slot.
  explicit top_recorder(std::size_t capacity);

  // `now`: the decision's wall-clock second.
  template <typename Describe>
  void hit(std::int64_t now, std::uint64_t id, std::uint64_t n, Describe&& describe) {
    slot_at(now).hits.add(id, n, describe);
  }
  template <typename Describe>
  void over_limit(std::int64_t now, std::uint64_t id, std::uint64_t n, Describe&& describe) {
    slot_at(now).over_limit.add(id, n, describe);
  }

  struct list {
    std::vector<space_saving::item> items;  // one per id, the slots' counts summed
  };
  struct copy {
    list hits;
    list over_limit;
  };
  // The window as of `now`, each list merged over its slots. On the recorder's thread.
  copy snapshot(std::int64_t now) const;

 private:
  struct slot {
    std::int64_t epoch = -1;  // now / slot_seconds of what it holds
    space_saving hits;
    space_saving over_limit;
  };
  slot& slot_at(std::int64_t now);

  std::vector<slot> ring_;
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

// Every worker's copy merged, most first (ties by text), at most n per list.
top_lists merge_top(std::span<const top_recorder::copy> copies, std::size_t n, std::int64_t now);
// How far back the window reaches at `now`, in seconds (50 to 60).
std::int64_t top_window_seconds(std::int64_t now);

// The identity of a descriptor (a hash of its parts) and its text, built together from the same parts.
class top_key {
 public:
  // Values longer than this are cut (at a UTF-8 character boundary) and end in "…".
  static constexpr std::size_t max_value_bytes = 64;

  top_key(std::string_view domain, std::string_view rule);
  void add_entry(std::string_view key, std::string_view value);
  std::uint64_t id() const { return hash_; }
  // The text of the parts added so far: domain, rule and entries separated by '\x1f'.
  void describe(std::string& text) const;

 private:
  void mix(std::string_view part);

  std::uint64_t hash_ = 0xcbf29ce484222325ull;
  std::string_view domain_;
  std::string_view rule_;
  struct part {
    std::string_view key;
    std::string_view value;  // already cut
    bool cut;
  };
  std::array<part, 8> inline_parts_{};
  std::vector<part> more_parts_;
  std::size_t parts_ = 0;
};

// The value as shown: at most max_value_bytes, cut at a character boundary. Sets `cut`.
std::string_view cut_value(std::string_view value, bool& cut);

}  // namespace sluice::stats
