// libFuzzer: the counters API's query (ratelimit/api/counters_query.hpp). The input is used twice: as a
// request target (no crash; a parsed query has a domain and 1-64 entries with non-empty keys), and split at
// 0xFF bytes into a domain and entries (k\xFEv) that the harness encodes into targets three ways: the
// documented descriptor form (docs/guides/operate.md#counters-look-at-reset-set; each part percent-encoded),
// repeated entry= parameters and a descriptor escaped whole (each as Python's urlencode writes it: '+' for a
// space). Each comes back exactly where the form can carry it (entry=: no '=' in a key; the whole descriptor:
// no ',' anywhere either); descriptor and entry together are refused.
//
// Build and run: scripts/fuzz counters_query [seconds]

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "ratelimit/api/counters_query.hpp"

namespace {

using namespace sluice::ratelimit::api;

void check(bool ok) {
  if (!ok) std::abort();
}

std::string encoded(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// application/x-www-form-urlencoded, as Python's urlencode (quote_plus) writes a value.
std::string form_encoded(std::string_view s) {
  std::string out;
  std::size_t from = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == ' ') {
      out += encoded(s.substr(from, i - from));
      if (i < s.size()) out += '+';
      from = i + 1;
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  auto any = parse_counters_query(input);
  if (auto* q = std::get_if<counters_query>(&any)) {
    check(!q->domain.empty());
    check(!q->entries.empty() && q->entries.size() <= 64);
    for (const auto& [k, v] : q->entries) check(!k.empty());
  }

  // domain \xFF k1 \xFE v1 \xFF k2 \xFE v2 ...
  std::string domain;
  counters_query want;
  std::size_t at = 0;
  bool first = true;
  while (at <= input.size()) {
    const auto end = std::min(input.find('\xff', at), input.size());
    const auto part = input.substr(at, end - at);
    if (first) {
      want.domain = std::string(part);
      first = false;
    } else {
      const auto sep = part.find('\xfe');
      want.entries.emplace_back(std::string(part.substr(0, sep)), sep == std::string_view::npos
                                                                      ? std::string()
                                                                      : std::string(part.substr(sep + 1)));
    }
    at = end + 1;
  }
  std::string target = "/counters?domain=" + encoded(want.domain) + "&descriptor=";
  for (std::size_t i = 0; i < want.entries.size(); ++i) {
    if (i > 0) target += ',';
    target += encoded(want.entries[i].first) + "=" + encoded(want.entries[i].second);
  }
  auto back = parse_counters_query(target);
  const bool valid =
      !want.domain.empty() && !want.entries.empty() && want.entries.size() <= 64 &&
      std::all_of(want.entries.begin(), want.entries.end(), [](const auto& e) { return !e.first.empty(); });
  check(std::holds_alternative<counters_query>(back) == valid);
  if (valid) {
    const auto& q = std::get<counters_query>(back);
    check(q.domain == want.domain);
    check(q.entries == want.entries);
    check(!q.used);
  }

  const bool no_eq_in_keys = std::none_of(want.entries.begin(), want.entries.end(), [](const auto& e) {
    return e.first.find('=') != std::string::npos;
  });
  std::string entries_target = "/counters?domain=" + form_encoded(want.domain);
  std::string joined;
  for (const auto& [k, v] : want.entries) {
    entries_target += "&entry=" + form_encoded(k + "=" + v);
    joined += (joined.empty() ? "" : ",") + k + "=" + v;
  }
  auto by_entry = parse_counters_query(entries_target);
  if (no_eq_in_keys) {
    check(std::holds_alternative<counters_query>(by_entry) == valid);
    if (valid) {
      check(std::get<counters_query>(by_entry).domain == want.domain);
      check(std::get<counters_query>(by_entry).entries == want.entries);
    }
  }
  const bool no_comma = std::none_of(want.entries.begin(), want.entries.end(), [](const auto& e) {
    return e.first.find(',') != std::string::npos || e.second.find(',') != std::string::npos;
  });
  auto whole = parse_counters_query("/counters?domain=" + form_encoded(want.domain) +
                                    "&descriptor=" + form_encoded(joined));
  if (no_eq_in_keys && no_comma) {
    check(std::holds_alternative<counters_query>(whole) == valid);
    if (valid) check(std::get<counters_query>(whole).entries == want.entries);
  }
  if (!want.entries.empty())
    check(std::holds_alternative<std::string>(
        parse_counters_query(entries_target + "&descriptor=" + form_encoded(joined))));
  return 0;
}
