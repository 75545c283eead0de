#include "settings_registry.hpp"

#include <algorithm>
#include <ostream>

#include "auth/api_key_store.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "echo/settings.hpp"
#include "holidays/settings.hpp"
#include "process_settings.hpp"
#include "ratelimit/backends/memcache/settings.hpp"
#include "ratelimit/backends/memory/settings.hpp"
#include "ratelimit/backends/redis/settings.hpp"
#include "ratelimit/rlqs_settings.hpp"
#include "ratelimit/settings.hpp"
#include "ratelimit/xds_settings.hpp"
#include "stats/sink_settings.hpp"
#include "tracing/settings.hpp"

namespace sluice {

namespace {

template <typename List>
std::vector<core::setting> to_vector(const List& list) {
  return {std::begin(list), std::end(list)};
}

std::vector<core::setting> joined(std::vector<core::setting> a, const std::vector<core::setting>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Sluice reads every variable envoyproxy/ratelimit reads. These names come from upstream's documentation but
// neither reads them (a prefix ends with '_'): set, they would look like settings and do nothing.
struct upstream_only {
  std::string_view name;
  std::string_view instead;
};
constexpr upstream_only upstream_only_settings[]{
    {"GLOBAL_SHADOW_MODE", "SHADOW_MODE (GlobalShadowMode is the Go field's name, not the variable's)"},
    {"DOG_STATSD_MOGRIFIERS_", "DOG_STATSD_MOGRIFIER_<NAME>_* (upstream's README misspells the prefix)"},
};
bool is_upstream_only(std::string_view name, const upstream_only& u) {
  return u.name.ends_with('_') ? name.starts_with(u.name) : name == u.name;
}

// Variables Kubernetes makes for every service: never Sluice's settings.
bool kubernetes_injected(std::string_view name, std::string_view value) {
  return name.ends_with("_SERVICE_HOST") || name.ends_with("_SERVICE_PORT") ||
         name.find("_PORT_") != std::string_view::npos ||
         (name.ends_with("_PORT") && value.find("://") != std::string_view::npos);
}

// What is wrong with the declarations (a name twice, a default its kind does not take), one line each.
std::vector<std::string> declaration_errors() {
  std::vector<std::string> errors;
  std::vector<std::string_view> seen;
  for (const auto& section : settings_registry()) {
    for (const auto& s : section.settings) {
      if (std::ranges::find(seen, s.name) != seen.end())
        errors.push_back(core::cat(s.name, " is declared twice"));
      seen.push_back(s.name);
      if (s.default_value.empty() || s.computed_default()) continue;
      const auto& d = s.default_value;
      std::uint64_t whole = 0;
      const bool ok = s.kind == "bool"           ? core::parse_go_bool(d).has_value()
                      : s.kind == "duration"     ? core::parse_go_duration(d).has_value()
                      : s.kind == "whole number" ? core::parse_unsigned(d, whole)
                      : s.kind == "number"       ? core::parse_number(d).has_value()
                      : s.kind.find('|') != std::string_view::npos
                          ? std::ranges::count(core::split(s.kind, '|'), d) == 1
                          : true;
      if (!ok) errors.push_back(core::cat(s.name, ": the default '", d, "' is not a ", s.kind));
    }
  }
  return errors;
}

void print_markdown(std::ostream& out) {
  // A raw string: each sentence stays whole, so that grep finds it.
  out << R"(# Settings

Every environment variable Sluice reads, with its default and what it does. Settings are read once, at
start-up. Names and defaults are envoyproxy/ratelimit's. Each section links to the pages that explain its
settings at length.

- An unset or empty variable takes the default. A default in parentheses is worked out at start-up.
- Booleans take Go's forms: `1 t T TRUE true True 0 f F FALSE false False`.
- Durations take Go's forms: `500ms`, `10s`, `1m30s`.
- A value that cannot be parsed stops start-up with exit code 1 and a message that names the variable and
  what it takes, such as `sluice: invalid value 'abc' for PORT: expected a whole number from 0 to 65535`.
- A variable that is not a setting is warned about at start-up when it starts with a setting's first word
  (`REDIS_`, `LIMIT_`, ...) and is one or two edits from that setting's name:
  `BACKEND_TYP is not a setting: did you mean BACKEND_TYPE? (it is ignored)`. Kubernetes' service variables
  (`*_SERVICE_HOST`, `*_PORT_*`, `REDIS_PORT=tcp://…`) never are, and neither are names of one word: `HOME`
  is two edits from `HOST`, and every shell sets it.

`sluice settings` prints the same list as text, one setting per line. This page is its output with
`--format markdown`, and a test fails when the two differ.
)";
  for (const auto& section : settings_registry()) {
    out << "\n## " << section.title << "\n\nIn depth: " << section.details
        << ".\n\n| Setting | Takes | Default | Meaning |\n|---|---|---|---|\n";
    for (const auto& s : section.settings) {
      const auto def = s.default_value.empty() ? std::string("(empty)")
                       : s.computed_default()  ? std::string(s.default_value)
                                               : core::cat("`", s.default_value, "`");
      std::string kind;
      for (const auto part : core::split(s.kind, '|')) kind += core::cat(kind.empty() ? "" : ", ", part);
      out << "| `" << s.name << "` | " << kind << " | " << def << " | " << s.meaning << " |\n";
    }
  }
  out << "\n## Names that do nothing\n\nSluice reads every variable envoyproxy/ratelimit reads. These names "
         "appear in upstream's documentation, but neither reads them; Sluice warns at start-up when one is "
         "set "
         "(and when a variable with one of its prefixes is one or two edits from a setting's name).\n\n"
         "| Variable | Instead |\n|---|---|\n";
  for (const auto& u : upstream_only_settings) out << "| `" << u.name << "` | " << u.instead << " |\n";
}

}  // namespace

const std::vector<settings_section>& settings_registry() {
  static const std::vector<settings_section> sections{
      {"Process: listeners, workers, logs", to_vector(process_settings_list()),
       "[the server](../concepts/server.md), [logs and the debug "
       "server](apis.md#debug-server-debug_hostdebug_port)"},
      {"Rate limit service", to_vector(ratelimit::module_settings_list()),
       "[where rules come from](../concepts/rule-sources.md), "
       "[decisions](../concepts/backends.md#decisions-and-backend), "
       "[limit tables](../guides/tenant-tables.md), [operating](../guides/operate.md), "
       "[headers](../guides/observe/headers.md)"},
      {"Rules from an xDS server", to_vector(ratelimit::xds_settings()),
       "[rules from an xDS "
       "server](../concepts/rule-sources.md#rules-from-an-xds-server-config_typegrpc_xds_sotw)"},
      {"Redis backend", ratelimit::backends::redis::redis_backend_settings(),
       "[Redis backend](../concepts/backends.md#redis-backend), [batched "
       "counting](../concepts/batched-counting.md)"},
      {"Several regions (Redis)", to_vector(ratelimit::backends::redis::region_backend_settings()),
       "[several regions, one limit](../guides/regions.md)"},
      {"Memcached backend", to_vector(ratelimit::backends::memcache::memcache_backend_settings()),
       "[memcached backend](../concepts/backends.md#memcached-backend-backend_typememcache)"},
      {"Memory backend", to_vector(ratelimit::backends::memory::memory_backend_settings()),
       "[decisions and backend](../concepts/backends.md#decisions-and-backend), "
       "[counters that survive a "
       "restart](../concepts/backends.md#counters-that-survive-a-restart-memory_snapshot_file)"},
      {"Rate Limit Quota Service (RLQS)", to_vector(ratelimit::rlqs_settings()),
       "[RLQS](../guides/rlqs.md#settings-rlqs_)"},
      {"Stats", to_vector(stats::sink_settings_list()),
       "[metrics](metrics.md), [Prometheus](../guides/observe/prometheus.md), "
       "[the live dashboard](../guides/observe/dashboard.md)"},
      {"Tracing", tracing::tracing_settings(), "[tracing](../guides/observe/tracing.md)"},
      {"Echo and auth-info API", joined(to_vector(echo::echo_settings()), {auth::api_keys_file_setting}),
       "[the echo API's settings](../echo.md#settings)"},
      {"Holidays API", to_vector(holidays::holidays_settings()),
       "[the holidays API's settings](../holidays.md#settings)"},
  };
  return sections;
}

int print_settings(std::span<const std::string_view> args, std::ostream& out, std::ostream& err) {
  std::string_view format = "text";
  for (std::size_t i = 0; i < args.size(); ++i) {
    if ((args[i] == "--format" || args[i] == "-format") && i + 1 < args.size()) {
      format = args[++i];
    } else if (args[i].starts_with("--format=")) {
      format = args[i].substr(9);
    } else {
      err << "sluice settings: unknown argument '" << args[i]
          << "'\nUsage: sluice settings [--format text|markdown]\n";
      return 2;
    }
  }
  if (const auto errors = declaration_errors(); !errors.empty()) {
    for (const auto& e : errors) err << "sluice settings: " << e << "\n";
    return 1;
  }
  if (format == "markdown") {
    print_markdown(out);
    return 0;
  }
  if (format != "text") {
    err << "sluice settings: unknown format '" << format << "' (text or markdown)\n";
    return 2;
  }
  std::size_t name_width = 0, default_width = 0;
  for (const auto& section : settings_registry()) {
    for (const auto& s : section.settings) {
      name_width = std::max(name_width, s.name.size());
      default_width = std::max(default_width, s.default_value.empty() ? 7 : s.default_value.size());
      default_width = std::min<std::size_t>(default_width, 20);  // a longer one (computed) pushes its line
    }
  }
  for (const auto& section : settings_registry()) {
    for (const auto& s : section.settings) {
      const std::string_view def = s.default_value.empty() ? "(empty)" : s.default_value;
      out << s.name << std::string(name_width + 2 - s.name.size(), ' ') << def
          << std::string(def.size() < default_width ? default_width + 2 - def.size() : 2, ' ') << s.meaning
          << "\n";
    }
  }
  return 0;
}

std::vector<std::string> unknown_setting_warnings(const core::env_reader& env) {
  // Sluice's variables, by the settings' first words (REDIS_, LIMIT_, OTEL_, ...): a variable of another
  // program is not warned about. A setting of one word (HOST, PORT) gives no prefix: HOME, two edits from
  // HOST, is every shell's.
  std::vector<std::string_view> declared;
  std::vector<std::string_view> prefixes;
  for (const auto& section : settings_registry()) {
    for (const auto& s : section.settings) {
      declared.push_back(s.name);
      if (const auto underscore = s.name.find('_'); underscore != std::string_view::npos)
        prefixes.push_back(s.name.substr(0, underscore + 1));
    }
  }
  std::vector<std::string> warnings;
  std::vector<std::string> upstream;
  for (const auto& name : env.names()) {
    if (std::ranges::find(declared, name) != declared.end()) continue;
    if (name.starts_with("DOG_STATSD_MOGRIFIER_")) continue;  // named by USE_DOG_STATSD_MOGRIFIERS
    if (auto u = std::ranges::find_if(upstream_only_settings,
                                      [&](const auto& u) { return is_upstream_only(name, u); });
        u != std::end(upstream_only_settings)) {
      upstream.push_back(core::cat(name, " (", u->instead, ")"));
      continue;
    }
    const bool looks_ours =
        std::ranges::any_of(prefixes, [&](std::string_view p) { return name.starts_with(p); });
    if (!looks_ours || kubernetes_injected(name, env.get_string(name, ""))) continue;
    std::string_view nearest;
    std::size_t best = 3;
    for (auto d : declared) {
      const auto distance = core::edit_distance(name, d, 2);
      if (distance < best) {
        best = distance;
        nearest = d;
      }
    }
    if (!nearest.empty())
      warnings.push_back(core::cat(name, " is not a setting: did you mean ", nearest, "? (it is ignored)"));
  }
  if (!upstream.empty())
    warnings.push_back(
        core::cat("set but read neither by Sluice nor by envoyproxy/ratelimit, whose documentation "
                  "names them: ",
                  core::join(upstream, "; ")));
  return warnings;
}

}  // namespace sluice
