#include "ratelimit/config/yaml_scalar.hpp"

#include <yaml-cpp/yaml.h>

#include <array>
#include <charconv>
#include <string>
#include <string_view>

namespace sluice::ratelimit::config {

namespace {

constexpr std::array<std::string_view, 11> true_words{"y",    "Y",    "yes", "Yes", "YES", "true",
                                                      "True", "TRUE", "on",  "On",  "ON"};
constexpr std::array<std::string_view, 11> false_words{"n",     "N",     "no",  "No",  "NO", "false",
                                                       "False", "FALSE", "off", "Off", "OFF"};

bool is_plain(const YAML::Node& n) {
  return n.Tag() == "?" || n.Tag().empty();
}

bool in(std::string_view s, const auto& words) {
  for (auto w : words) {
    if (s == w) return true;
  }
  return false;
}

// An integer in yaml.v2's forms (decimal, 0x, 0o/0 octal, 0b, '_' separators) that fits in 64 bits.
std::optional<std::int64_t> parse_integer(std::string_view s) {
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  int base = 10;
  if (s.starts_with("0x"))
    base = 16, s.remove_prefix(2);
  else if (s.starts_with("0b"))
    base = 2, s.remove_prefix(2);
  else if (s.starts_with("0o"))
    base = 8, s.remove_prefix(2);
  else if (s.size() > 1 && s[0] == '0')
    base = 8, s.remove_prefix(1);
  std::string digits;
  for (char c : s) {
    if (c != '_') digits.push_back(c);
  }
  if (digits.empty()) return std::nullopt;
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
  if (ec != std::errc{} || ptr != digits.data() + digits.size()) return std::nullopt;
  if (negative) {
    if (v > static_cast<std::uint64_t>(INT64_MAX) + 1) return std::nullopt;
    return static_cast<std::int64_t>(0 - v);
  }
  if (v > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

// The forms below are matched by hand, in one pass: std::regex recurses per character and overflows the stack
// on a long scalar (a 100 KB value crashed the loader), and it is slow on the large trees aliases make.

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// [-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?
bool is_floating(std::string_view s) {
  std::size_t i = 0;
  auto skip_digits = [&](bool underscores) {
    const std::size_t start = i;
    while (i < s.size() && (is_digit(s[i]) || (underscores && s[i] == '_'))) ++i;
    return i > start;
  };
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!skip_digits(false)) return false;
  } else {
    if (i == s.size() || !is_digit(s[i])) return false;
    skip_digits(true);
    if (i < s.size() && s[i] == '.') {
      ++i;
      skip_digits(true);
    }
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (!skip_digits(false)) return false;
  }
  return i == s.size();
}

// [-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)
bool is_inf_or_nan(std::string_view s) {
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return true;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  return s == ".inf" || s == ".Inf" || s == ".INF";
}

// [0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ].*)? where '.' is any character but a line break, as in ECMAScript.
bool is_timestamp(std::string_view s) {
  std::size_t i = 0;
  auto digits = [&](std::size_t min, std::size_t max) {
    std::size_t n = 0;
    while (n < max && i < s.size() && is_digit(s[i])) ++i, ++n;
    return n >= min;
  };
  auto dash = [&] { return i < s.size() && s[i++] == '-'; };
  if (!digits(4, 4) || !dash() || !digits(1, 2) || !dash() || !digits(1, 2)) return false;
  if (i == s.size()) return true;
  if (s[i] != 'T' && s[i] != 't' && s[i] != ' ') return false;
  return s.find_first_of("\r\n", i + 1) == std::string_view::npos;
}

}  // namespace

scalar_kind classify_scalar(const YAML::Node& n) {
  if (!is_plain(n)) return scalar_kind::string;
  const std::string& s = n.Scalar();
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return scalar_kind::null;
  if (in(s, true_words) || in(s, false_words)) return scalar_kind::boolean;
  if (parse_integer(s)) return scalar_kind::integer;
  if (is_floating(s) || is_inf_or_nan(s)) return scalar_kind::floating;
  if (is_timestamp(s)) return scalar_kind::timestamp;
  return scalar_kind::string;
}

std::optional<bool> parse_yaml_bool(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (in(s, true_words)) return true;
  if (in(s, false_words)) return false;
  return std::nullopt;
}

std::optional<double> parse_yaml_number(const YAML::Node& n) {
  const auto kind = classify_scalar(n);
  if (kind == scalar_kind::integer) return static_cast<double>(*parse_integer(n.Scalar()));
  if (kind != scalar_kind::floating || is_inf_or_nan(n.Scalar())) return std::nullopt;
  std::string digits;
  for (char c : n.Scalar()) {
    if (c != '_') digits.push_back(c);
  }
  if (digits[0] == '+') digits.erase(0, 1);  // from_chars takes no '+'
  double v = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc{} || ptr != digits.data() + digits.size()) return std::nullopt;  // out of range
  return v;
}

bool parse_yaml_uint32(const YAML::Node& n, std::uint32_t& out) {
  if (classify_scalar(n) != scalar_kind::integer) return false;
  auto v = parse_integer(n.Scalar());
  if (!v || *v < 0 || *v > 4294967295LL) return false;
  out = static_cast<std::uint32_t>(*v);
  return true;
}

}  // namespace sluice::ratelimit::config
