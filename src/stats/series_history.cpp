#include "stats/series_history.hpp"

#include <algorithm>
#include <array>
#include <unordered_set>

namespace sluice::stats {

namespace {

constexpr std::string_view rule_prefix = "ratelimit.service.rate_limit.";
constexpr std::array<std::string_view, 3> rule_stats{".total_hits", ".over_limit", ".near_limit"};

}  // namespace

series_history::series_history(store& s, std::vector<std::string> watched, std::vector<std::string> timers,
                               std::size_t points, std::size_t max_keys)
    : store_(s),
      points_(std::max<std::size_t>(2, points)),
      max_keys_(max_keys),
      times_(points_, 0.0),
      timer_mean_(points_, 0.0F) {
  for (const auto& name : timers) timers_.push_back(&s.get_timer(name));
  timer_count_.rates.assign(points_, 0.0F);
  timer_sum_.rates.assign(points_, 0.0F);
  for (auto& name : watched) {
    auto& c = s.get_counter(name);
    watched_.emplace(std::move(name),
                     watched_counter{&c, track{0, false, std::vector<float>(points_, 0.0F)}});
  }
}

void series_history::step(track& t, std::uint64_t value, double seconds) {
  // A key seen for the first time gives its baseline: its counter may be older than this history (made before
  // the first sample, or followed again after it was let go).
  if (!first_ && t.seen) {
    t.rates[head_] =
        value >= t.last ? static_cast<float>(static_cast<double>(value - t.last) / seconds) : 0.0F;
  }
  t.last = value;
  t.seen = true;
}

// Followed for the whole history, and nothing in it: a young key (its baseline only) is never idle.
bool series_history::idle(const rule_track& r) const {
  if (samples_taken_ - r.since < points_) return false;
  auto zero = [](const track& t) {
    return std::all_of(t.rates.begin(), t.rates.end(), [](float v) { return v == 0.0F; });
  };
  return zero(r.hits) && zero(r.over_limit) && zero(r.near_limit);
}

void series_history::sample(double wall_seconds, double steady_seconds) {
  const double seconds = steady_seconds - last_time_;
  if (!first_ && seconds <= 0) return;
  // Under the store's locks only the names' check: workers making a stat wait for no more than that.
  struct found {
    const std::string* name;
    const counter* c;
    std::size_t kind;  // index into rule_stats
  };
  std::vector<found> counters;
  store_.for_each_counter([&](const std::string& name, const counter& c) {
    std::string_view n = name;
    if (!n.starts_with(rule_prefix)) return;
    for (std::size_t k = 0; k < rule_stats.size(); ++k) {
      if (n.ends_with(rule_stats[k]) && n.size() > rule_prefix.size() + rule_stats[k].size()) {
        counters.push_back({&name, &c, k});
        return;
      }
    }
  });
  // Full: keys idle for the whole history make room for new ones.
  std::vector<std::string> idle_keys;
  if (rules_.size() >= max_keys_) {
    for (const auto& [key, r] : rules_)
      if (idle(r)) idle_keys.push_back(key);
  }
  // This sample's place, written by step() for every key read.
  if (!first_) {
    for (auto& [_, r] : rules_)
      r.hits.rates[head_] = r.over_limit.rates[head_] = r.near_limit.rates[head_] = 0;
  }
  std::unordered_set<std::string> let_go;
  untracked_ = 0;
  for (const auto& f : counters) {
    const std::string_view n = *f.name;
    const auto suffix = rule_stats[f.kind].size();
    std::string key(n.substr(rule_prefix.size(), n.size() - rule_prefix.size() - suffix));
    auto it = rules_.find(key);
    if (it == rules_.end()) {
      if (rules_.size() >= max_keys_) {
        // A key let go in this sample does not come back in it (it would push out another idle key).
        if (idle_keys.empty() || let_go.contains(key)) {
          untracked_ += f.kind == 0 ? 1 : 0;
          continue;
        }
        rules_.erase(idle_keys.back());
        let_go.insert(std::move(idle_keys.back()));
        idle_keys.pop_back();
      }
      rule_track fresh;
      fresh.since = samples_taken_;
      for (auto* t : {&fresh.hits, &fresh.over_limit, &fresh.near_limit}) t->rates.assign(points_, 0.0F);
      it = rules_.emplace(std::move(key), std::move(fresh)).first;
    }
    auto& r = it->second;
    step(f.kind == 0 ? r.hits : f.kind == 1 ? r.over_limit : r.near_limit, f.c->value(), seconds);
  }
  for (auto& [_, w] : watched_) step(w.rates, w.source->value(), seconds);
  std::uint64_t count = 0, sum_us = 0;
  for (const auto* t : timers_) {
    count += t->count();
    sum_us += static_cast<std::uint64_t>(t->sum_milliseconds() * 1000.0);
  }
  if (!first_) {
    const std::uint64_t calls = count - std::min(count, timer_count_.last);
    const std::uint64_t micros = sum_us - std::min(sum_us, timer_sum_.last);
    timer_mean_[head_] = calls == 0 ? 0.0F : static_cast<float>(static_cast<double>(micros) / 1000.0 / calls);
    times_[head_] = wall_seconds;
    head_ = (head_ + 1) % points_;
    samples_ = std::min(samples_ + 1, points_);
  }
  timer_count_.last = count;
  timer_sum_.last = sum_us;
  last_time_ = steady_seconds;
  first_ = false;
  ++samples_taken_;
}

std::vector<double> series_history::times() const {
  return ordered(times_);
}

std::vector<series_history::rule_series> series_history::rules() const {
  std::vector<rule_series> out;
  out.reserve(rules_.size());
  for (const auto& [key, r] : rules_)
    out.push_back({key, ordered(r.hits.rates), ordered(r.over_limit.rates), ordered(r.near_limit.rates)});
  return out;
}

std::vector<float> series_history::total(std::string_view counter) const {
  auto it = watched_.find(std::string(counter));
  return it == watched_.end() ? std::vector<float>{} : ordered(it->second.rates.rates);
}

std::vector<float> series_history::timer_mean_ms() const {
  return ordered(timer_mean_);
}

}  // namespace sluice::stats
