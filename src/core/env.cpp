#include "core/env.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include <unistd.h>

#include "core/strings.hpp"

namespace sluice::core {

env_reader::env_reader()
    : lookup_([](const std::string& name) -> std::optional<std::string> {
        const char* v = std::getenv(name.c_str());
        if (v == nullptr) return std::nullopt;
        return std::string(v);
      }),
      names_([] {
        std::vector<std::string> out;
        for (char** e = environ; *e != nullptr; ++e) {
          const std::string_view entry(*e);
          out.emplace_back(entry.substr(0, entry.find('=')));
        }
        return out;
      }) {}

env_reader::env_reader(std::map<std::string, std::string> values)
    : lookup_([values](const std::string& name) -> std::optional<std::string> {
        auto it = values.find(name);
        if (it == values.end()) return std::nullopt;
        return it->second;
      }),
      names_([values] {
        std::vector<std::string> out;
        for (const auto& [name, value] : values) out.push_back(name);
        return out;
      }) {}

std::vector<std::string> env_reader::names() const {
  return names_();
}

namespace {

// A declaration's default, which the code relies on: one that does not parse is a bug.
[[noreturn]] void bad_default(const setting& s) {
  throw std::logic_error(cat("the declared default '", s.default_value, "' of ", s.name, " does not parse"));
}

}  // namespace

std::string env_reader::get_string(const setting& s) const {
  return get_string(std::string(s.name), s.computed_default() ? "" : s.default_value);
}

bool env_reader::get_bool(const setting& s) const {
  const auto def = parse_go_bool(s.default_value);
  if (!def) bad_default(s);
  return get_bool(std::string(s.name), *def);
}

bool env_reader::get_bool(const setting& s, bool computed) const {
  if (!s.computed_default()) bad_default(s);
  return get_bool(std::string(s.name), computed);
}

std::uint64_t env_reader::get_uint(const setting& s, std::uint64_t min, std::uint64_t max) const {
  std::uint64_t def = 0;
  if (!parse_unsigned(s.default_value, def)) bad_default(s);
  return get_uint(std::string(s.name), def, min, max);
}

std::uint64_t env_reader::get_uint(const setting& s, std::uint64_t computed, std::uint64_t min,
                                   std::uint64_t max) const {
  if (!s.computed_default()) bad_default(s);
  return get_uint(std::string(s.name), computed, min, max);
}

double env_reader::get_double(const setting& s, double min, double max) const {
  const auto def = parse_number(s.default_value);
  if (!def) bad_default(s);
  return get_double(std::string(s.name), *def, min, max);
}

std::chrono::nanoseconds env_reader::get_duration(const setting& s) const {
  const auto def = parse_go_duration(s.default_value);
  if (!def) bad_default(s);
  return get_duration(std::string(s.name), *def);
}

std::vector<std::pair<std::string, std::string>> env_reader::get_map(const setting& s) const {
  return get_map(std::string(s.name));
}

std::string env_reader::get_choice(const setting& s, bool case_insensitive) const {
  return choose(std::string(s.name), s.default_value, split(s.kind, '|'), case_insensitive);
}

std::optional<std::string> env_reader::raw(const std::string& name) const {
  auto v = lookup_(name);
  if (!v || v->empty()) return std::nullopt;
  return v;
}

std::vector<std::pair<std::string, std::string>> env_reader::get_map(const std::string& name) const {
  const auto text = get_string(name, "");
  if (trim_space(text).empty()) return {};
  std::map<std::string, std::string> pairs;
  for (auto item : split(text, ',')) {
    const auto kv = split(item, ':');
    if (kv.size() != 2) {
      throw settings_error(cat("invalid value '", text, "' for ", name, ": item '", item,
                               "' is not key:value (expected k1:v1,k2:v2)"));
    }
    pairs[std::string(kv[0])] = std::string(kv[1]);
  }
  return {pairs.begin(), pairs.end()};
}

std::string env_reader::get_string(const std::string& name, std::string_view def) const {
  auto v = raw(name);
  return v ? *v : std::string(def);
}

bool env_reader::get_bool(const std::string& name, bool def) const {
  auto v = raw(name);
  if (!v) return def;
  auto b = parse_go_bool(*v);
  if (!b) {
    throw settings_error(cat("invalid value '", *v, "' for ", name,
                             ": expected true or false (also 1, t, T, TRUE, True; 0, f, F, FALSE, False)"));
  }
  return *b;
}

std::uint64_t env_reader::get_uint(const std::string& name, std::uint64_t def, std::uint64_t min,
                                   std::uint64_t max) const {
  auto v = raw(name);
  if (!v) return def;
  std::uint64_t out = 0;
  if (!parse_unsigned(*v, out) || out < min || out > max) {
    throw settings_error(
        cat("invalid value '", *v, "' for ", name, ": expected a whole number from ", min, " to ", max));
  }
  return out;
}

double env_reader::get_double(const std::string& name, double def, double min, double max) const {
  auto v = raw(name);
  if (!v) return def;
  const auto out = parse_number(*v);
  if (!out || *out < min || *out > max) {
    throw settings_error(
        cat("invalid value '", *v, "' for ", name, ": expected a number from ", min, " to ", max));
  }
  return *out;
}

std::chrono::nanoseconds env_reader::get_duration(const std::string& name,
                                                  std::chrono::nanoseconds def) const {
  auto v = raw(name);
  if (!v) return def;
  auto d = parse_go_duration(*v);
  if (!d || d->count() < 0) {
    throw settings_error(cat("invalid value '", *v, "' for ", name,
                             ": expected a duration such as 500ms, 10s, 1m30s (units ns, us, ms, s, m, h)"));
  }
  return *d;
}

std::string env_reader::get_choice(const std::string& name, std::string_view def,
                                   std::initializer_list<std::string_view> allowed,
                                   bool case_insensitive) const {
  return choose(name, def, allowed, case_insensitive);
}

std::string env_reader::choose(const std::string& name, std::string_view def,
                               std::span<const std::string_view> allowed, bool case_insensitive) const {
  auto v = raw(name);
  if (!v) return std::string(def);
  std::string probe = case_insensitive ? ascii_lower(*v) : *v;
  for (auto a : allowed) {
    if (probe == (case_insensitive ? ascii_lower(a) : std::string(a))) return std::string(a);
  }
  std::string list;
  for (auto a : allowed) list += cat(list.empty() ? "" : ", ", a);
  throw settings_error(cat("invalid value '", *v, "' for ", name, ": expected one of ", list));
}

std::optional<double> parse_number(std::string_view s) {
  const std::string text(s);
  char* end = nullptr;
  const double out = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(out)) return std::nullopt;
  return out;
}

std::optional<bool> parse_go_bool(std::string_view s) {
  if (s == "1" || s == "t" || s == "T" || s == "TRUE" || s == "true" || s == "True") return true;
  if (s == "0" || s == "f" || s == "F" || s == "FALSE" || s == "false" || s == "False") return false;
  return std::nullopt;
}

std::optional<std::chrono::nanoseconds> parse_go_duration(std::string_view s) {
  if (s == "0") return std::chrono::nanoseconds{0};
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return std::nullopt;
  long double total = 0;
  while (!s.empty()) {
    std::size_t i = 0;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
    if (i == 0) return std::nullopt;
    std::string number(s.substr(0, i));
    if (std::ranges::count(number, '.') > 1 || number == ".") return std::nullopt;
    s.remove_prefix(i);
    std::size_t j = 0;
    while (j < s.size() && !std::isdigit(static_cast<unsigned char>(s[j])) && s[j] != '.') ++j;
    std::string_view unit = s.substr(0, j);
    s.remove_prefix(j);
    long double scale = 0;
    if (unit == "ns")
      scale = 1;
    else if (unit == "us" || unit == "\u00b5s" || unit == "\u03bcs")
      scale = 1e3;
    else if (unit == "ms")
      scale = 1e6;
    else if (unit == "s")
      scale = 1e9;
    else if (unit == "m")
      scale = 60e9;
    else if (unit == "h")
      scale = 3600e9;
    else
      return std::nullopt;
    total += std::strtold(number.c_str(), nullptr) * scale;
  }
  if (total > 9.2e18L) return std::nullopt;
  auto ns = std::chrono::nanoseconds(static_cast<std::int64_t>(total));
  return negative ? -ns : ns;
}

namespace {

// `v` with its last `digits` digits as a fraction, trailing zeros dropped: (1500, 3) -> "1.5".
std::string with_fraction(std::uint64_t v, int digits) {
  std::uint64_t scale = 1;
  for (int i = 0; i < digits; ++i) scale *= 10;
  std::string fraction = std::to_string(v % scale);
  fraction.insert(0, static_cast<std::size_t>(digits) - fraction.size(), '0');
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  return cat(v / scale, fraction.empty() ? "" : ".", fraction);
}

}  // namespace

std::string format_go_duration(std::chrono::nanoseconds d) {
  const std::int64_t n = d.count();
  const std::uint64_t u = n < 0 ? 0 - static_cast<std::uint64_t>(n) : static_cast<std::uint64_t>(n);
  constexpr std::uint64_t second = 1'000'000'000, minute = 60 * second;
  if (u == 0) return "0s";
  std::string out;
  if (u < 1'000) {
    out = cat(u, "ns");
  } else if (u < 1'000'000) {
    out = with_fraction(u, 3) + "\u00b5s";
  } else if (u < second) {
    out = with_fraction(u, 6) + "ms";
  } else {
    out = with_fraction(u % minute, 9) + "s";
    if (const auto minutes = u / minute; minutes > 0) {
      out = cat(minutes % 60, "m", out);
      if (minutes >= 60) out = cat(minutes / 60, "h", out);
    }
  }
  return n < 0 ? "-" + out : out;
}

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= list.size()) {
    auto comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    if (comma > start) parts.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return parts;
}

}  // namespace sluice::core
