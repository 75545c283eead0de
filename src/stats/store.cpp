#include "stats/store.hpp"

#include <algorithm>
#include <cctype>

namespace sluice::stats {

namespace {

template <typename T, typename Table, typename Make>
T& find_or_create(std::mutex& mutex, Table& table, std::string_view name, Make&& make) {
  std::lock_guard lock(mutex);
  auto it = table.find(name);
  if (it == table.end()) it = table.emplace(std::string(name), make()).first;
  return *it->second;
}

bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

// Length of the run of digits at `pos` (0 when there is none).
std::size_t digit_run(std::string_view s, std::size_t pos) {
  std::size_t n = 0;
  while (pos + n < s.size() && is_digit(s[pos + n])) ++n;
  return n;
}

}  // namespace

counter& store::get_counter(std::string_view name) {
  auto& s = shard_of(name);
  return find_or_create<counter>(s.mutex, s.counters, name,
                                 [this] { return std::make_unique<counter>(cells_); });
}

gauge& store::get_gauge(std::string_view name) {
  auto& s = shard_of(name);
  return find_or_create<gauge>(s.mutex, s.gauges, name, [] { return std::make_unique<gauge>(); });
}

timer& store::get_timer(std::string_view name) {
  auto& s = shard_of(name);
  return find_or_create<timer>(s.mutex, s.timers, name,
                               [&] { return std::make_unique<timer>(std::string(name), observer_, cells_); });
}

counter& store::get_counter_bounded(std::string_view name, std::string_view overflow_name) {
  auto& s = shard_of(name);
  {
    std::lock_guard lock(s.mutex);
    auto it = s.counters.find(name);
    if (it != s.counters.end()) return *it->second;
    // Reserve a slot first, so concurrent creators never overshoot the bound.
    if (dynamic_.fetch_add(1, std::memory_order_relaxed) < max_dynamic_) {
      return *s.counters.emplace(std::string(name), std::make_unique<counter>(cells_)).first->second;
    }
    dynamic_.fetch_sub(1, std::memory_order_relaxed);
  }
  return get_counter(overflow_name);
}

void store::add_generator(std::function<void()> generate) {
  std::lock_guard lock(generators_mutex_);
  generators_.push_back(std::move(generate));
}

void store::run_generators() {
  std::lock_guard lock(generators_mutex_);
  for (auto& g : generators_) g();
}

void store::for_each_counter(const std::function<void(const std::string&, const counter&)>& visit) const {
  for (const auto& s : shards_) {
    std::lock_guard lock(s.mutex);
    for (const auto& [name, c] : s.counters) visit(name, *c);
  }
}

void store::for_each_gauge(const std::function<void(const std::string&, const gauge&)>& visit) const {
  for (const auto& s : shards_) {
    std::lock_guard lock(s.mutex);
    for (const auto& [name, g] : s.gauges)
      if (g->shown()) visit(name, *g);
  }
}

void store::for_each_timer(const std::function<void(const std::string&, timer&)>& visit) {
  for (auto& s : shards_) {
    std::lock_guard lock(s.mutex);
    for (auto& [name, t] : s.timers) visit(name, *t);
  }
}

std::string one_level(std::string_view part) {
  std::string out;
  out.reserve(part.size());
  for (char c : part) {
    if (c == '.') {
      out += level_dot;
    } else {
      out += c;
    }
  }
  return out;
}

std::string dots_restored(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0;;) {
    const auto found = text.find(level_dot, at);
    out.append(text.substr(at, found == std::string_view::npos ? std::string_view::npos : found - at));
    if (found == std::string_view::npos) return out;
    out += '.';
    at = found + level_dot.size();
  }
}

std::string sanitize_stat_name(std::string_view name) {
  std::string out(name);
  std::ranges::replace(out, ':', '_');
  std::ranges::replace(out, '|', '_');
  // Dotted quads (1 to 3 digits, four times), wherever they appear, as upstream's regex finds them.
  for (std::size_t i = 0; i < out.size();) {
    std::size_t pos = i, dots[3];
    bool quad = true;
    for (int part = 0; part < 4 && quad; ++part) {
      // The last part, like the regex, takes up to three digits of a longer run.
      const std::size_t n = part == 3 ? std::min<std::size_t>(digit_run(out, pos), 3) : digit_run(out, pos);
      quad = n >= 1 && n <= 3;
      pos += n;
      if (quad && part < 3) {
        quad = pos < out.size() && out[pos] == '.';
        dots[part] = pos++;
      }
    }
    if (quad) {
      for (auto d : dots) out[d] = '_';
      i = pos;
    } else {
      ++i;
    }
  }
  return out;
}

}  // namespace sluice::stats
