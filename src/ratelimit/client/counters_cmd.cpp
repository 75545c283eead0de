#include "ratelimit/client/counters_cmd.hpp"

#include <boost/beast/http/verb.hpp>
#include <iostream>

#include "core/problem.hpp"
#include "core/read_file.hpp"
#include "ratelimit/client/client_flags.hpp"
#include "ratelimit/client/debug_http.hpp"

namespace sluice::ratelimit::client {

namespace http = boost::beast::http;

namespace {

constexpr std::string_view mixed = "-descriptor and -entry cannot be combined: give every entry with -entry";

constexpr std::string_view usage = R"(Usage: sluice counters get|reset|set [flags]
  get     print what a descriptor's limits have counted (GET /counters on the debug listener)
  reset   reset them, every algorithm (DELETE; needs a token of ADMIN_TOKEN_FILE)
  set     leave them at -used hits (PUT; needs a token)
Flags:
  -debug_addr host:port    the debug listener (default localhost:6070)
  -domain d                the rate limit domain
  -descriptor k=v[,k=v]    the descriptor's entries
  -entry key=value         one entry, repeated for each in order, instead of -descriptor: split at the
                           first '=', the value taken verbatim (a value such as "a,b" or "=")
  -token_file f            a file whose first token line is sent as Authorization: Bearer (reset, set)
  -used n                  set: the hits to leave counted
  -timeout duration        deadline of the call (default 5s)
Exit status: 0 with the answer's JSON on stdout, 2 on any error.
)";

core::problem parse_descriptor(std::string_view value, counters_options& o) {
  if (o.by_entry) return std::string(mixed);
  if (!o.entries.empty())
    return std::string("-descriptor is given twice: give every entry in one, k=v,k2=v2");
  return parse_key_values(value, o.entries);
}

core::problem parse_entry(std::string_view value, counters_options& o) {
  if (!o.by_entry && !o.entries.empty()) return std::string(mixed);
  o.by_entry = true;
  const auto eq = value.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return core::cat("invalid value '", value, "' for -entry: expected key=value (a key, then the value)");
  o.entries.emplace_back(std::string(value.substr(0, eq)), std::string(value.substr(eq + 1)));
  return std::nullopt;
}

core::problem parse_used(std::string_view value, counters_options& o) {
  std::uint64_t n = 0;
  if (!core::parse_unsigned(value, n))
    return core::cat("invalid value '", value, "' for -used: expected a whole number, 0 or more");
  o.used = n;
  return std::nullopt;
}

core::problem parse_timeout(std::string_view value, counters_options& o) {
  return parse_positive_duration("timeout", value, "500ms or 2s", o.timeout);
}

const flag_spec<counters_options> specs[] = {
    {"debug_addr", &counters_options::debug_addr},      {"domain", &counters_options::domain},
    {"descriptor", nullptr, nullptr, parse_descriptor}, {"entry", nullptr, nullptr, parse_entry},
    {"token_file", &counters_options::token_file},      {"used", nullptr, nullptr, parse_used},
    {"timeout", nullptr, nullptr, parse_timeout}};

void escape_into(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
}

// The first token line of the file: what an operator's token file holds.
std::optional<std::string> read_token(const std::string& path, std::string& problem) {
  const auto text = core::read_file(path);
  if (!text) {
    problem = core::cat(path, ": ", text.error());
    return std::nullopt;
  }
  for (auto line : core::split(*text, '\n')) {
    line = core::trim_space(line);
    if (!line.empty() && line.front() != '#') return std::string(line);
  }
  problem = core::cat(path, ": holds no token");
  return std::nullopt;
}

int fail(std::string_view message) {
  std::cerr << "sluice counters: " << message << "\n";
  return 2;
}

}  // namespace

std::variant<counters_options, help_requested, std::string> parse_counters_flags(
    std::span<const std::string_view> args) {
  counters_options o;
  if (args.empty()) return std::string("give an action: get, reset or set");
  if (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") return help_requested{};
  o.action = std::string(args[0]);
  if (o.action != "get" && o.action != "reset" && o.action != "set")
    return core::cat("unknown action '", args[0], "': expected get, reset or set");
  if (auto stop = parse_flags(args.subspan(1), std::span<const flag_spec<counters_options>>(specs), o))
    return stopped<std::variant<counters_options, help_requested, std::string>>(std::move(*stop));
  if (o.domain.empty()) return std::string("-domain is required");
  if (o.entries.empty()) return std::string("-descriptor (k=v[,k=v]) or -entry (key=value) is required");
  if (o.action == "set" && !o.used) return std::string("set needs -used n");
  if (o.action != "set" && o.used) return std::string("-used is only for set");
  if (o.action != "get" && o.token_file.empty())
    return core::cat(o.action,
                     " needs -token_file (a file holding a token of the server's ADMIN_TOKEN_FILE)");
  return o;
}

std::string counters_target(const counters_options& o) {
  std::string t = "/counters?domain=";
  escape_into(t, o.domain);
  if (o.by_entry) {
    for (const auto& [key, value] : o.entries) {
      t += "&entry=";
      escape_into(t, core::cat(key, "=", value));
    }
  } else {
    t += "&descriptor=";
    for (std::size_t i = 0; i < o.entries.size(); ++i) {
      if (i > 0) t += ',';
      escape_into(t, o.entries[i].first);
      t += '=';
      escape_into(t, o.entries[i].second);
    }
  }
  if (o.used) t += core::cat("&used=", *o.used);
  return t;
}

int run_counters(std::span<const std::string_view> args) {
  auto parsed = parse_counters_flags(args);
  if (std::holds_alternative<help_requested>(parsed)) {
    std::cout << usage;
    return 0;
  }
  if (const auto* error = std::get_if<std::string>(&parsed)) {
    std::cerr << "sluice counters: " << *error << "\n\n" << usage;
    return 2;
  }
  const auto& o = std::get<counters_options>(parsed);
  std::optional<std::string> token;
  if (!o.token_file.empty()) {
    std::string problem;
    token = read_token(o.token_file, problem);
    if (!token) return fail(core::cat("-token_file: ", problem));
  }
  const auto method = o.action == "get"     ? http::verb::get
                      : o.action == "reset" ? http::verb::delete_
                                            : http::verb::put;
  std::vector<std::pair<std::string, std::string>> headers;
  if (token) headers.emplace_back("Authorization", core::cat("Bearer ", *token));
  return run_debug_call("counters", o.debug_addr, method, counters_target(o), {}, headers, o.timeout);
}

}  // namespace sluice::ratelimit::client
