#include "ratelimit/backends/redis/region_settings.hpp"

#include <algorithm>
#include <set>

#include "core/strings.hpp"

namespace sluice::ratelimit::backends::redis {

namespace region_settings_decl {

using core::setting;
constexpr setting region{"REDIS_REGION", "text", "",
                         "this instance's region (letters, digits, - and _): names it in logs, stats and the "
                         "dashboard, and its heartbeat in its own Redis"};
constexpr setting remotes{
    "REDIS_REMOTE_REGIONS", "list", "",
    "<region>=<host:port or unix:path>,...: for each other region, a Redis here that holds "
    "its counters (a replica of its primary); decisions add their totals"};
constexpr setting auth_file{
    "REDIS_REMOTE_AUTH_FILE", "path", "",
    "<region>=<password or user:password> lines for the remote Redis servers; re-read "
    "when it changes"};
constexpr setting sync_interval{"REDIS_REMOTE_SYNC_INTERVAL", "duration", "250ms",
                                "how often the remote regions' totals are read (10ms to 10s)"};
constexpr setting max_lag{
    "REDIS_REMOTE_MAX_LAG", "duration", "2s",
    "a remote region whose totals are older than this, or whose replica's link is down, "
    "is unreachable"};
constexpr setting fallback{"REDIS_REMOTE_FALLBACK", "last|share", "last",
                           "while a region is unreachable: last: its last totals until their windows end; "
                           "share: each region takes an even share of what is left"};
constexpr setting cold_interval{
    "REDIS_REMOTE_COLD_INTERVAL", "duration", "0s",
    "0s: every key is read every REDIS_REMOTE_SYNC_INTERVAL. Longer: a key that cannot reach its limit "
    "before "
    "the next read, at twice the rates last seen, is read only this often (up to 60s)"};
constexpr setting all[]{region, remotes, auth_file, sync_interval, max_lag, fallback, cold_interval};

bool valid_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::ranges::all_of(name, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

[[noreturn]] void refuse(const setting& s, std::string_view value, std::string_view why) {
  throw core::settings_error(core::cat("invalid value '", value, "' for ", s.name, ": ", why));
}

// One entry of REDIS_REMOTE_REGIONS (`list`): its name and where to read it, connected as `main` is
// (timeouts, backoff, TLS) with its own secret from REDIS_REMOTE_AUTH_FILE (`secrets`, a path) when there is
// one.
remote_region read_remote(const std::string& entry, const std::string& list, const std::string& own,
                          const sluice::redis::connection_config& main, const std::string& secrets) {
  const auto equals = entry.find('=');
  if (equals == std::string::npos || equals == 0 || equals + 1 == entry.size())
    refuse(remotes, list, core::cat("expected <region>=<host:port or unix:path>, got '", entry, "'"));
  remote_region remote;
  remote.name = core::trim_space(std::string_view(entry).substr(0, equals));
  const auto address = std::string(core::trim_space(std::string_view(entry).substr(equals + 1)));
  if (!valid_name(remote.name))
    refuse(remotes, list,
           core::cat("'", remote.name, "' is not a region name (letters, digits, '-' and '_')"));
  if (remote.name == own)
    refuse(remotes, list, core::cat("'", own, "' is this instance's own region (REDIS_REGION)"));
  auto& c = remote.connection;
  c = main;
  c.sentinel.reset();
  c.auth_file.reset();
  c.username.clear();
  c.password.clear();
  if (address.starts_with("unix:")) {
    c.unix_socket = true;
    c.address = address.substr(5);
    c.tls.enabled = false;
  } else if (address.rfind(':') == std::string::npos) {
    refuse(remotes, list,
           core::cat("region '", remote.name, "': expected one host:port or unix:path, got '", address, "'"));
  } else {
    c.unix_socket = false;
    c.address = address;
  }
  if (!secrets.empty()) {
    try {
      c.auth_file =
          std::make_shared<sluice::redis::credential_file>(secrets, std::string(auth_file.name), remote.name);
    } catch (const std::runtime_error& e) {
      throw core::settings_error(core::cat(auth_file.name, ": ", e.what()));
    }
  }
  return remote;
}

}  // namespace region_settings_decl

std::span<const core::setting> region_backend_settings() {
  return region_settings_decl::all;
}

std::optional<region_settings> read_region_settings(const core::env_reader& env,
                                                    const sluice::redis::connection_config& main,
                                                    bool cluster) {
  using namespace region_settings_decl;
  const auto name = env.get_string(region);
  const auto list = env.get_string(remotes);
  const auto secrets = env.get_string(auth_file);
  if (name.empty()) {
    for (const auto* s : {&remotes, &auth_file}) {
      if (!env.get_string(*s).empty())
        throw core::settings_error(core::cat(s->name, " needs REDIS_REGION: name this instance's region"));
    }
    return std::nullopt;
  }
  if (!valid_name(name)) refuse(region, name, "expected a name of letters, digits, '-' and '_'");
  if (cluster) {
    throw core::settings_error(
        "REDIS_REGION cannot be used with REDIS_TYPE=cluster: a region's own store must be one Redis "
        "(single or behind sentinels), whose keys its replicas in the other regions copy whole");
  }
  region_settings r;
  r.region = name;
  std::set<std::string> seen{name};
  for (const auto& entry : core::split_list(list)) {
    auto& remote = r.remotes.emplace_back(read_remote(entry, list, name, main, secrets));
    if (!seen.insert(remote.name).second)
      refuse(remotes, list, core::cat("region '", remote.name, "' is listed twice"));
  }
  r.sync_interval = core::to_ms(env.get_duration(sync_interval));
  if (r.sync_interval < std::chrono::milliseconds{10} || r.sync_interval > std::chrono::seconds{10})
    refuse(sync_interval, env.get_string(sync_interval), "expected a duration from 10ms to 10s");
  r.max_lag = core::to_ms(env.get_duration(max_lag));
  if (r.max_lag < r.sync_interval)
    refuse(max_lag, env.get_string(max_lag),
           "expected a duration of at least REDIS_REMOTE_SYNC_INTERVAL (totals are that old between reads)");
  r.fallback = env.get_choice(fallback, true) == "share" ? remote_fallback::share : remote_fallback::last;
  r.cold_interval = core::to_ms(env.get_duration(cold_interval));
  if (r.cold_interval.count() != 0 &&
      (r.cold_interval < 2 * r.sync_interval || r.cold_interval > std::chrono::seconds{60}))
    refuse(cold_interval, env.get_string(cold_interval),
           "expected 0s (off), or a duration from twice REDIS_REMOTE_SYNC_INTERVAL to 60s");
  return r;
}

core::problem region_refuses_algorithm(const std::optional<region_settings>& regions,
                                       std::string_view algorithm) {
  if (!regions || algorithm != "gcra") return std::nullopt;
  return std::string(
      "algorithm gcra cannot be shared across regions (REDIS_REGION is set): a theoretical arrival time "
      "cannot "
      "be summed over regions. Use sliding_window (or fixed_window) for a limit shared by the regions, or "
      "give "
      "each region its own GCRA limit of requests_per_unit / regions in a separate deployment");
}

}  // namespace sluice::ratelimit::backends::redis
