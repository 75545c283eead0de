#include "stats/series_history.hpp"

#include <array>

namespace sluice::stats {

namespace {

constexpr std::string_view rule_prefix = "ratelimit.service.rate_limit.";
constexpr std::array<std::string_view, 3> rule_stats{".total_hits", ".over_limit", ".near_limit"};

}  // namespace

series_history::series_history(store& s, std::vector<std::string> watched, std::string timer,
                               std::size_t points, std::size_t max_keys)
    : store_(s),
      points_(std::max<std::size_t>(2, points)),
      max_keys_(max_keys),
      times_(points_, 0.0),
      timer_(s.get_timer(timer)),
      timer_mean_(points_, 0.0F) {
  timer_count_.rates.assign(points_, 0.0F);
  timer_sum_.rates.assign(points_, 0.0F);
  for (auto& name : watched) {
    auto& c = s.get_counter(name);
    watched_.emplace(std::move(name),
                     watched_counter{&c, track{0, false, std::vector<float>(points_, 0.0F)}});
  }
}

void series_history::step(track& t, std::uint64_t value, double seconds) {
  if (!first_) {
    // A key first seen now was made since the last sample: all of its count is new.
    const std::uint64_t before = t.seen ? t.last : 0;
    t.rates[head_] =
        value >= before ? static_cast<float>(static_cast<double>(value - before) / seconds) : 0.0F;
  }
  t.last = value;
  t.seen = true;
}

void series_history::sample(double now_seconds) {
  const double seconds = now_seconds - last_time_;
  if (!first_ && seconds <= 0) return;
  if (!first_) {
    for (auto& [_, r] : rules_)
      r.hits.rates[head_] = r.over_limit.rates[head_] = r.near_limit.rates[head_] = 0;
  }
  untracked_ = 0;
  store_.for_each_counter([&](const std::string& name, const counter& c) {
    std::string_view n = name;
    if (!n.starts_with(rule_prefix)) return;
    for (std::size_t k = 0; k < rule_stats.size(); ++k) {
      if (!n.ends_with(rule_stats[k]) || n.size() <= rule_prefix.size() + rule_stats[k].size()) continue;
      const std::string key(
          n.substr(rule_prefix.size(), n.size() - rule_prefix.size() - rule_stats[k].size()));
      auto it = rules_.find(key);
      if (it == rules_.end()) {
        if (rules_.size() >= max_keys_) {
          untracked_ += k == 0 ? 1 : 0;
          return;
        }
        rule_track fresh;
        for (auto* t : {&fresh.hits, &fresh.over_limit, &fresh.near_limit}) t->rates.assign(points_, 0.0F);
        it = rules_.emplace(key, std::move(fresh)).first;
      }
      auto& r = it->second;
      step(k == 0 ? r.hits : k == 1 ? r.over_limit : r.near_limit, c.value(), seconds);
      return;
    }
  });
  for (auto& [_, w] : watched_) step(w.rates, w.source->value(), seconds);
  const std::uint64_t count = timer_.count();
  const auto sum_us = static_cast<std::uint64_t>(timer_.sum_milliseconds() * 1000.0);
  if (!first_) {
    const std::uint64_t calls = count - std::min(count, timer_count_.last);
    const std::uint64_t micros = sum_us - std::min(sum_us, timer_sum_.last);
    timer_mean_[head_] = calls == 0 ? 0.0F : static_cast<float>(static_cast<double>(micros) / 1000.0 / calls);
    times_[head_] = now_seconds;
    head_ = (head_ + 1) % points_;
    samples_ = std::min(samples_ + 1, points_);
  }
  timer_count_.last = count;
  timer_sum_.last = sum_us;
  last_time_ = now_seconds;
  first_ = false;
}

std::vector<float> series_history::ordered(const std::vector<float>& ring) const {
  std::vector<float> out;
  out.reserve(samples_);
  for (std::size_t i = 0; i < samples_; ++i) out.push_back(ring[(head_ + points_ - samples_ + i) % points_]);
  return out;
}

std::vector<double> series_history::times() const {
  std::vector<double> out;
  out.reserve(samples_);
  for (std::size_t i = 0; i < samples_; ++i)
    out.push_back(times_[(head_ + points_ - samples_ + i) % points_]);
  return out;
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
