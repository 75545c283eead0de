#include "stats/top_descriptors.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <functional>
#include <random>
#include <unordered_map>

namespace sluice::stats {

space_saving::space_saving(std::size_t capacity) : capacity_(std::max<std::size_t>(1, capacity)) {
  // At most half full: probes stay short.
  const std::size_t buckets = std::bit_ceil(capacity_ * 2);
  index_.assign(buckets, 0);
  shift_ = 64 - std::countr_zero(buckets);
  items_.reserve(capacity_);
  heap_.reserve(capacity_);
  heap_pos_.reserve(capacity_);
}

std::uint64_t space_saving::floor() const {
  return items_.size() < capacity_ || heap_.empty() ? 0 : items_[heap_[0]].count;
}

void space_saving::clear() {
  total_ = 0;
  items_.clear();
  heap_.clear();
  heap_pos_.clear();
  std::fill(index_.begin(), index_.end(), 0);
}

void space_saving::index_insert(std::uint32_t i) {
  const std::size_t mask = index_.size() - 1;
  std::size_t b = bucket_of(items_[i].id);
  while (index_[b] != 0) b = (b + 1) & mask;
  index_[b] = i + 1;
}

// Backward-shift deletion: later entries of the probe run move into the hole when their home allows it.
void space_saving::index_erase(std::uint64_t id) {
  const std::size_t mask = index_.size() - 1;
  std::size_t hole = bucket_of(id);
  while (items_[index_[hole] - 1].id != id) hole = (hole + 1) & mask;
  for (std::size_t b = (hole + 1) & mask; index_[b] != 0; b = (b + 1) & mask) {
    const std::size_t home = bucket_of(items_[index_[b] - 1].id);
    // Movable when its home is not in (hole, b], going round.
    const bool movable = hole <= b ? (home <= hole || home > b) : (home <= hole && home > b);
    if (movable) {
      index_[hole] = index_[b];
      hole = b;
    }
  }
  index_[hole] = 0;
}

std::uint32_t space_saving::take(std::uint64_t id, std::uint64_t n) {
  if (items_.size() < capacity_) {
    const auto i = static_cast<std::uint32_t>(items_.size());
    items_.push_back({id, n, {}});
    heap_.push_back(i);
    heap_pos_.push_back(static_cast<std::uint32_t>(heap_.size() - 1));
    index_insert(i);
    sift_up(heap_pos_[i]);
    return i;
  }
  // The smallest counter is the new item's, with that count on top.
  const std::uint32_t i = heap_[0];
  index_erase(items_[i].id);
  items_[i].id = id;
  items_[i].count = saturating_add(items_[i].count, n);
  index_insert(i);
  sift_down(0);
  return i;
}

void space_saving::raise(std::uint32_t i, std::uint64_t n) {
  items_[i].count = saturating_add(items_[i].count, n);
  sift_down(heap_pos_[i]);
}

void space_saving::place(std::uint32_t pos, std::uint32_t i) {
  heap_[pos] = i;
  heap_pos_[i] = pos;
}

void space_saving::sift_down(std::uint32_t pos) {
  const std::uint32_t i = heap_[pos];
  const std::uint64_t count = items_[i].count;
  const auto size = static_cast<std::uint32_t>(heap_.size());
  for (;;) {
    std::uint32_t child = 2 * pos + 1;
    if (child >= size) break;
    if (child + 1 < size && items_[heap_[child + 1]].count < items_[heap_[child]].count) ++child;
    if (items_[heap_[child]].count >= count) break;
    place(pos, heap_[child]);
    pos = child;
  }
  place(pos, i);
}

void space_saving::sift_up(std::uint32_t pos) {
  const std::uint32_t i = heap_[pos];
  const std::uint64_t count = items_[i].count;
  while (pos > 0) {
    const std::uint32_t parent = (pos - 1) / 2;
    if (items_[heap_[parent]].count <= count) break;
    place(pos, heap_[parent]);
    pos = parent;
  }
  place(pos, i);
}

top_recorder::top_recorder(std::size_t capacity, bool hash_values)
    : capacity_(std::max<std::size_t>(1, capacity)), hash_values_(hash_values) {
  ring_.reserve(slots);
  for (std::size_t i = 0; i < slots; ++i)
    ring_.push_back({-1, space_saving(capacity), space_saving(capacity)});
}

void top_recorder::start_slot(slot& s, std::int64_t epoch) {
  // A slot older than the window: its counts leave the window all at once.
  s.hits.clear();
  s.over_limit.clear();
  s.epoch = epoch;
}

bool top_recorder::in_window(const slot& s, std::int64_t now) const {
  const std::int64_t epoch = std::max<std::int64_t>(0, now) / slot_seconds;
  return s.epoch >= 0 && s.epoch <= epoch && s.epoch > epoch - static_cast<std::int64_t>(slots);
}

void top_recorder::add_counts(std::int64_t now, std::size_t slot_index, counts& into) const {
  const auto& s = ring_.at(slot_index);
  if (!in_window(s, now)) return;
  for (const auto& it : s.hits.items()) into.hits.emplace_back(it.id, it.count);
  for (const auto& it : s.over_limit.items()) into.over_limit.emplace_back(it.id, it.count);
}

top_recorder::counts top_recorder::counts_in_window(std::int64_t now) const {
  counts out;
  out.hits.reserve(capacity_ * slots);
  out.over_limit.reserve(capacity_ * slots);
  for (std::size_t i = 0; i < slots; ++i) add_counts(now, i, out);
  return out;
}

void top_recorder::find_texts(std::int64_t now, std::unordered_map<std::uint64_t, std::string>& texts) const {
  for (auto& [id, text] : texts) {
    for (const auto& s : ring_) {
      if (!text.empty()) break;
      if (!in_window(s, now)) continue;
      for (const auto* summary : {&s.hits, &s.over_limit}) {
        if (const auto* it = summary->held(id)) {
          text = it->text;
          break;
        }
      }
    }
  }
}

namespace {

using ranked = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

ranked rank(std::span<const top_recorder::counts> copies, std::size_t n,
            ranked top_recorder::counts::*which) {
  std::unordered_map<std::uint64_t, std::uint64_t> sums;
  for (const auto& c : copies)
    for (const auto& [id, count] : c.*which) sums[id] = saturating_add(sums[id], count);
  ranked out(sums.begin(), sums.end());
  const std::size_t keep = std::min(n, out.size());
  std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(keep), out.end(),
                    [](const auto& a, const auto& b) {
                      return a.second != b.second ? a.second > b.second : a.first < b.first;
                    });
  out.resize(keep);
  return out;
}

std::vector<top_entry> named(const ranked& ids, const std::unordered_map<std::uint64_t, std::string>& texts,
                             std::size_t n) {
  std::vector<std::pair<const std::string*, std::uint64_t>> found;
  for (const auto& [id, count] : ids) {
    auto it = texts.find(id);
    if (it != texts.end() && !it->second.empty()) found.emplace_back(&it->second, count);
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : *a.first < *b.first;
  });
  std::vector<top_entry> out;
  for (std::size_t i = 0; i < std::min(n, found.size()); ++i) {
    out.push_back(top_text_decode(*found[i].first));
    out.back().count = found[i].second;
  }
  return out;
}

}  // namespace

top_ranking rank_top(std::span<const top_recorder::counts> copies, std::size_t n) {
  return {rank(copies, n, &top_recorder::counts::hits), rank(copies, n, &top_recorder::counts::over_limit)};
}

std::unordered_map<std::uint64_t, std::string> texts_wanted(const top_ranking& ranking) {
  std::unordered_map<std::uint64_t, std::string> texts;
  for (const auto* list : {&ranking.hits, &ranking.over_limit})
    for (const auto& [id, _] : *list) texts.try_emplace(id);
  return texts;
}

top_lists name_top(const top_ranking& ranking, const std::unordered_map<std::uint64_t, std::string>& texts,
                   std::size_t n, std::int64_t now) {
  top_lists out;
  out.window_seconds = top_window_seconds(now);
  out.hits = named(ranking.hits, texts, n);
  out.over_limit = named(ranking.over_limit, texts, n);
  return out;
}

top_lists merge_top(std::span<const top_recorder* const> recorders, std::size_t n, std::int64_t now) {
  std::vector<top_recorder::counts> copies;
  for (const auto* r : recorders) copies.push_back(r->counts_in_window(now));
  const auto ranking = rank_top(copies, n + top_ranking_slack);
  auto texts = texts_wanted(ranking);
  for (const auto* r : recorders) r->find_texts(now, texts);
  return name_top(ranking, texts, n, now);
}

std::int64_t top_window_seconds(std::int64_t now) {
  now = std::clamp<std::int64_t>(now, 0, INT64_MAX / 2);  // a clock this wrong still gives 51 to 60
  const std::int64_t epoch = now / top_recorder::slot_seconds;
  const std::int64_t oldest =
      (epoch - static_cast<std::int64_t>(top_recorder::slots) + 1) * top_recorder::slot_seconds;
  return now + 1 - oldest;  // through the end of second `now`
}

std::string_view cut_value(std::string_view value, bool& cut) {
  cut = value.size() > top_max_value_bytes;
  if (!cut) return value;
  std::size_t end = top_max_value_bytes;
  // Back off continuation bytes (10xxxxxx) so the cut falls between characters.
  while (end > 0 && (static_cast<unsigned char>(value[end]) & 0xC0) == 0x80) --end;
  return value.substr(0, end);
}

const std::uint64_t top_id::seed = [] {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}();

namespace {

// Each part is its length (4 bytes) and its bytes: a value may hold any character.
char* put_part_length(char* p, std::size_t length) {
  const auto n = static_cast<std::uint32_t>(length);
  std::memcpy(p, &n, sizeof n);
  return p + sizeof n;
}

}  // namespace

// One resize and plain copies: a descriptor's text is written each time it takes a counter, which under
// traffic spread over more descriptors than counters is every decision.
void top_text_begin(std::string& text, std::string_view domain, std::string_view rule) {
  text.resize(2 * sizeof(std::uint32_t) + domain.size() + rule.size());
  char* p = put_part_length(text.data(), domain.size());
  std::memcpy(p, domain.data(), domain.size());
  p = put_part_length(p + domain.size(), rule.size());
  std::memcpy(p, rule.data(), rule.size());
}

void top_text_entry(std::string& text, std::string_view key, std::string_view value) {
  constexpr std::string_view ellipsis = "\u2026";
  bool key_cut = false;
  bool value_cut = false;
  const auto key_shown = cut_value(key, key_cut);
  const auto value_shown = cut_value(value, value_cut);
  const std::size_t length = key_shown.size() + (key_cut ? ellipsis.size() : 0) + 1 + value_shown.size() +
                             (value_cut ? ellipsis.size() : 0);
  const std::size_t at = text.size();
  text.resize(at + sizeof(std::uint32_t) + length);
  char* p = put_part_length(text.data() + at, length);
  auto put = [&p](std::string_view part) {
    std::memcpy(p, part.data(), part.size());
    p += part.size();
  };
  put(key_shown);
  if (key_cut) put(ellipsis);
  *p++ = '=';
  put(value_shown);
  if (value_cut) put(ellipsis);
}

void top_text_more(std::string& text) {
  constexpr std::string_view ellipsis = "\u2026";
  const std::size_t at = text.size();
  text.resize(at + sizeof(std::uint32_t) + ellipsis.size());
  std::memcpy(put_part_length(text.data() + at, ellipsis.size()), ellipsis.data(), ellipsis.size());
}

namespace {

// The key of TOP_DESCRIPTORS_VALUES=hash: random per process, never shown.
const std::array<unsigned char, 32>& display_key() {
  static const auto key = [] {
    std::array<unsigned char, 32> k{};
    if (RAND_bytes(k.data(), static_cast<int>(k.size())) != 1) {
      std::random_device device;
      for (auto& b : k) b = static_cast<unsigned char>(device());
    }
    return k;
  }();
  return key;
}

}  // namespace

// HMAC-SHA-256 of the key and the value as shown: without the process's key nobody can tell a value from its
// hash, however few the values it could be (addresses, user names). Computed only when a descriptor takes a
// counter.
void top_text_entry_hashed(std::string& text, std::string_view key, std::string_view value) {
  bool cut = false;
  std::string message(cut_value(key, cut));
  message += '\0';
  message += cut_value(value, cut);
  const auto& k = display_key();
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), k.data(), static_cast<int>(k.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &length);
  char hashed[14];
  std::snprintf(hashed, sizeof hashed, "#%02x%02x%02x%02x%02x%02x", digest[0], digest[1], digest[2],
                digest[3], digest[4], digest[5]);
  top_text_entry(text, key, std::string_view(hashed, 13));
}

top_entry top_text_decode(std::string_view text) {
  top_entry e;
  for (std::size_t part = 0; text.size() >= sizeof(std::uint32_t); ++part) {
    std::uint32_t n = 0;
    std::memcpy(&n, text.data(), sizeof n);
    text.remove_prefix(sizeof n);
    const auto bytes = text.substr(0, n);
    text.remove_prefix(bytes.size());
    if (part == 0) {
      e.domain = bytes;
    } else if (part == 1) {
      e.rule = bytes;
    } else {
      e.entries.emplace_back(bytes);
    }
  }
  return e;
}

}  // namespace sluice::stats
