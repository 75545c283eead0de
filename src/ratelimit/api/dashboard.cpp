#include "ratelimit/api/dashboard.hpp"

#include "ratelimit/api/plain_json.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <map>
#include <numeric>
#include <unordered_map>

#include "core/strings.hpp"
#include "stats/store.hpp"

namespace sluice::ratelimit::api {

namespace json = boost::json;

namespace {

json::array entries_json(const std::vector<stats::top_entry>& list, std::size_t n) {
  json::array out;
  for (std::size_t i = 0; i < std::min(n, list.size()); ++i) {
    const auto& e = list[i];
    json::array entries;
    for (const auto& kv : e.entries) entries.emplace_back(kv);
    out.emplace_back(json::object{
        {"domain", e.domain}, {"entries", std::move(entries)}, {"rule", e.rule}, {"count", e.count}});
  }
  return out;
}

json::object top_object(const stats::top_lists& top, std::size_t n) {
  return {{"window_seconds", top.window_seconds},
          {"over_limit", entries_json(top.over_limit, n)},
          {"hits", entries_json(top.hits, n)}};
}

template <typename T>
json::array numbers(const std::vector<T>& values) {
  json::array out;
  out.reserve(values.size());
  for (const auto v : values) out.emplace_back(static_cast<double>(v));
  return out;
}

// What the rules say of a series key: its domain and rule path, and its limit.
struct rule_info {
  std::string domain;
  std::string rule;  // the node's path without the domain: the top lists' "rule"
  const config::rate_limit* limit = nullptr;
  bool shadow_mode = false;  // the rule's node's
};

// The counter a top entry's hits went to: its entries, with a share_threshold level's value replaced by the
// pattern all its values share (as the cache key is built), so that the values of one shared counter add up.
std::string counter_of(const stats::top_entry& e, const config::rule_set* rules) {
  std::vector<config::entry> entries;
  for (const auto& kv : e.entries) {
    const auto eq = kv.find('=');
    const std::string_view text(kv);
    entries.push_back(
        {text.substr(0, eq), eq == std::string::npos ? std::string_view() : text.substr(eq + 1)});
  }
  const auto* root = rules != nullptr ? rules->find_domain(e.domain) : nullptr;
  const auto shared =
      root != nullptr ? rules->get_limit(*root, entries).shared_values : std::vector<std::string_view>();
  std::string key;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const bool pattern = i < shared.size() && !shared[i].empty();
    core::append_to(key, entries[i].key, pattern ? "=*" : "=", pattern ? shared[i] : entries[i].value, "\n");
  }
  return key;
}

// The busiest counter of the rule among the top hits, as a share of the limit: a descriptor's, or a
// share_threshold counter's (the hits of every value that shares it).
std::optional<double> utilisation(const rule_info& info, const stats::top_lists& top,
                                  const config::rule_set* rules) {
  if (info.limit == nullptr || info.limit->unlimited || info.limit->requests_per_unit == 0 ||
      top.window_seconds <= 0)
    return std::nullopt;
  std::unordered_map<std::string, std::uint64_t> counters;
  std::uint64_t busiest = 0;
  for (const auto& e : top.hits) {
    if (e.domain != info.domain || e.rule != info.rule) continue;
    busiest = std::max(busiest, counters[counter_of(e, rules)] += e.count);
  }
  if (busiest == 0) return std::nullopt;
  // Its hits over one of the limit's windows at the top window's rate; a longer window: the top window's hits
  // (what the last minute took of it, not a projection over an hour or a day).
  const double per_second = static_cast<double>(busiest) / static_cast<double>(top.window_seconds);
  const auto seconds = std::min<std::int64_t>(info.limit->window_seconds(), top.window_seconds);
  return per_second * static_cast<double>(seconds) / info.limit->requests_per_unit;
}

double recent_sum(const std::vector<float>& v) {
  const std::size_t from = v.size() > 10 ? v.size() - 10 : 0;
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(from), v.end(), 0.0);
}

// Two series of one length, point by point.
std::vector<float> added(std::vector<float> a, const std::vector<float>& b) {
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) a[i] += b[i];
  return a;
}

std::vector<float> summed(const std::vector<stats::series_history::rule_series>& all,
                          std::vector<float> stats::series_history::rule_series::*which, std::size_t size) {
  std::vector<float> out(size, 0.0F);
  for (const auto& s : all)
    for (std::size_t i = 0; i < std::min(size, (s.*which).size()); ++i) out[i] += (s.*which)[i];
  return out;
}

json::object limit_json(const config::rate_limit& l, bool shadow_mode) {
  return {{"requests_per_unit", l.requests_per_unit},
          {"unit", config::unit_name(l.unit)},
          {"window_seconds", l.window_seconds()},
          {"algorithm", config::algorithm_name(l.algorithm)},
          {"shadow_mode", shadow_mode},
          {"unlimited", l.unlimited}};
}

double unix_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// Several regions (REDIS_REGION): this instance's region and each remote one's state, from the gauges
// region_reader sets (docs/guides/regions.md#watch-it); null without regions.
json::value regions_json(const stats::store* stats) {
  if (stats == nullptr) return nullptr;
  constexpr std::string_view prefix = "ratelimit.redis_region.";
  constexpr std::string_view this_region = "this_region.";
  std::map<std::string, json::object> remotes;
  json::object out;
  stats->for_each_gauge([&](const std::string& name, const stats::gauge& g) {
    if (!name.starts_with(prefix)) return;
    const auto rest = std::string_view(name).substr(prefix.size());
    if (rest.starts_with(this_region)) {
      out["region"] = std::string(rest.substr(this_region.size()));
      return;
    }
    const auto dot = rest.rfind('.');
    if (dot == std::string_view::npos) {
      out[rest] = g.value();
    } else {
      auto& r = remotes[std::string(rest.substr(0, dot))];
      r[rest.substr(dot + 1)] = g.value();
    }
  });
  if (!out.contains("region")) return nullptr;
  json::array list;
  for (auto& [name, r] : remotes) {
    r["name"] = name;
    list.emplace_back(std::move(r));
  }
  out["remotes"] = std::move(list);
  return out;
}

}  // namespace

std::string top_json(const stats::top_lists& top) {
  return plain_json(top_object(top, std::max(top.hits.size(), top.over_limit.size())));
}

std::string dashboard_json(const dashboard_inputs& in) {
  // Series keys are the rules' stats keys as the store names them (sanitized).
  std::unordered_map<std::string, rule_info> by_key;
  std::vector<std::string> domains;
  // Held to the end: by_key points into it.
  const auto rules = in.rules.current();
  if (rules) {
    rules->for_each_limit(
        [&](std::string_view domain, const config::descriptor_node& node, const config::rate_limit& l) {
          const auto sanitized = stats::sanitize_stat_name(config::limit_stats_key(node, l));
          by_key[sanitized] = {std::string(domain), std::string(config::rule_path(node, domain)), &l,
                               node.shadow_mode};
        });
    for (auto& d : rules->domain_names()) domains.push_back(stats::sanitize_stat_name(d));
    // Longest first: a key belongs to the longest domain it starts with.
    std::sort(domains.begin(), domains.end(),
              [](const auto& a, const auto& b) { return a.size() > b.size(); });
  }

  auto series = in.history.rules();
  // A rule a reload removed has no limit now, and its series is not from request values either: left out.
  std::erase_if(series, [&](const auto& s) { return !by_key.contains(s.key) && in.rules.removed(s.key); });
  const auto times = in.history.times();
  // The most throttled lately first, then the busiest.
  std::sort(series.begin(), series.end(), [](const auto& a, const auto& b) {
    const double ao = recent_sum(a.over_limit), bo = recent_sum(b.over_limit);
    if (ao != bo) return ao > bo;
    const double ah = recent_sum(a.hits), bh = recent_sum(b.hits);
    return ah != bh ? ah > bh : a.key < b.key;
  });
  json::array rules_out;
  for (std::size_t i = 0; i < std::min(series.size(), dashboard_rules_shown); ++i) {
    const auto& s = series[i];
    rule_info info;
    if (auto it = by_key.find(s.key); it != by_key.end()) {
      info = it->second;
    } else {
      // A key built from request values (detailed_metric, value_to_metric, an override): no limit to show.
      auto d = std::find_if(domains.begin(), domains.end(), [&](const std::string& name) {
        return s.key.size() > name.size() && s.key.starts_with(name) && s.key[name.size()] == '.';
      });
      const std::size_t cut = d != domains.end() ? d->size() : s.key.find('.');
      info.domain = s.key.substr(0, cut);
      info.rule = cut == std::string::npos ? "" : s.key.substr(cut + 1);
    }
    json::object row{{"domain", info.domain}, {"rule", info.rule}, {"key", s.key}};
    if (info.limit != nullptr) {
      row["limit"] = limit_json(*info.limit, info.shadow_mode);
    } else {
      row["limit"] = nullptr;
    }
    row["hits"] = numbers(s.hits);
    row["over_limit"] = numbers(s.over_limit);
    row["near_limit"] = numbers(s.near_limit);
    if (auto u = utilisation(info, in.top, rules.get())) {
      row["utilisation"] = *u;
    } else {
      row["utilisation"] = nullptr;
    }
    rules_out.emplace_back(std::move(row));
  }

  json::object totals{
      {"decisions", numbers(added(in.history.total(dashboard_totals::grpc_requests),
                                  in.history.total(dashboard_totals::json_requests)))},
      {"hits", numbers(summed(series, &stats::series_history::rule_series::hits, times.size()))},
      {"over_limit", numbers(summed(series, &stats::series_history::rule_series::over_limit, times.size()))},
      {"near_limit", numbers(summed(series, &stats::series_history::rule_series::near_limit, times.size()))},
      {"backend_errors", numbers(in.history.total(dashboard_totals::backend_errors))},
      {"fail_open", numbers(in.history.total(dashboard_totals::fail_open))},
      {"latency_ms", numbers(in.history.timer_mean_ms())}};

  json::array components;
  for (const auto& [name, healthy] : in.health.components())
    components.emplace_back(json::object{{"name", name}, {"healthy", healthy}});
  json::array reloads;
  for (const auto& r : in.rules.recent_reloads()) {
    reloads.emplace_back(json::object{{"time", unix_seconds(r.time)},
                                      {"ok", r.ok},
                                      {"source", r.source},
                                      {"domains", r.domains},
                                      {"error", r.error}});
  }

  json::object out{{"now", in.now},
                   {"interval_seconds", in.interval_seconds},
                   {"times", numbers(times)},
                   {"totals", std::move(totals)},
                   {"rules", std::move(rules_out)},
                   {"rules_untracked", in.history.untracked_keys()},
                   {"top", top_object(in.top, in.shown_top)},
                   {"backend", json::object{{"type", in.backend_type},
                                            {"healthy", in.health.healthy()},
                                            {"components", components},
                                            {"regions", regions_json(in.stats)}}},
                   {"reloads", std::move(reloads)}};
  return plain_json(out);
}

}  // namespace sluice::ratelimit::api
