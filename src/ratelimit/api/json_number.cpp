#include "ratelimit/api/json_number.hpp"

#include <charconv>
#include <limits>
#include <string>

namespace sluice::ratelimit::api::detail {

namespace {

struct json_integer_parts {
  bool negative = false;
  std::uint64_t magnitude = 0;
};

// Go protojson's integer rule (parseNumberParts + normalizeToIntString): a JSON number is an integer when its
// exponent shifts away every non-zero fractional digit ("2.0", "1e2", "100e-2" are; "1.5" is not), and the
// shifted form has at most 20 digits. `text` must be exactly one JSON number; numbers in strings use it too.
std::optional<json_integer_parts> to_integer(std::string_view text) {
  std::size_t i = 0;
  auto digit = [&](std::size_t k) { return k < text.size() && text[k] >= '0' && text[k] <= '9'; };
  json_integer_parts result;
  if (i < text.size() && text[i] == '-') {
    result.negative = true;
    ++i;
  }
  if (!digit(i)) return std::nullopt;
  std::string_view int_part;  // without leading zero: a lone "0" contributes no digits
  if (text[i] == '0') {
    ++i;
  } else {
    const std::size_t begin = i;
    while (digit(i)) ++i;
    int_part = text.substr(begin, i - begin);
  }
  std::string_view frac_part;
  if (i < text.size() && text[i] == '.') {
    const std::size_t begin = ++i;
    if (!digit(i)) return std::nullopt;
    while (digit(i)) ++i;
    frac_part = text.substr(begin, i - begin);
    while (!frac_part.empty() && frac_part.back() == '0') frac_part.remove_suffix(1);
  }
  std::string_view exponent_part;  // with its sign
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    const std::size_t begin = ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (!digit(i)) return std::nullopt;
    while (digit(i)) ++i;
    exponent_part = text.substr(begin, i - begin);
  }
  if (i != text.size()) return std::nullopt;
  // Any zero is 0, before the exponent is looked at: "-0" and "0e99999999999" included.
  if (int_part.empty() && frac_part.empty()) return json_integer_parts{};

  std::int32_t exponent = 0;  // Go parses it as an int32
  if (!exponent_part.empty()) {
    if (exponent_part.front() == '+') exponent_part.remove_prefix(1);
    const char* end = exponent_part.data() + exponent_part.size();
    if (std::from_chars(exponent_part.data(), end, exponent).ec != std::errc()) return std::nullopt;
  }
  auto push = [&](char c) {
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (result.magnitude > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return false;
    result.magnitude = result.magnitude * 10 + d;
    return true;
  };
  const auto int_size = static_cast<std::int64_t>(int_part.size());
  const auto frac_size = static_cast<std::int64_t>(frac_part.size());
  if (exponent >= 0) {
    if (frac_size > exponent || int_size + exponent > 20) return std::nullopt;
    for (char c : int_part)
      if (!push(c)) return std::nullopt;
    for (char c : frac_part)
      if (!push(c)) return std::nullopt;
    for (std::int64_t k = frac_size; k < exponent; ++k)
      if (!push('0')) return std::nullopt;
    return result;
  }
  const std::int64_t point = int_size + exponent;
  if (frac_size > 0 || point <= 0) return std::nullopt;  // point 0 would shift out the leading non-zero digit
  for (std::int64_t k = 0; k < int_size; ++k) {
    if (k >= point ? int_part[k] != '0' : !push(int_part[k])) return std::nullopt;
  }
  return result;
}

}  // namespace

std::optional<std::uint64_t> to_unsigned(std::string_view text, std::uint64_t max) {
  const auto n = to_integer(text);
  if (!n || (n->negative && n->magnitude != 0) || n->magnitude > max) return std::nullopt;
  return n->magnitude;
}

std::optional<std::int32_t> to_int32(std::string_view text) {
  const auto n = to_integer(text);
  if (!n) return std::nullopt;
  const std::uint64_t limit = n->negative ? std::uint64_t{1} << 31 : (std::uint64_t{1} << 31) - 1;
  if (n->magnitude > limit) return std::nullopt;
  return static_cast<std::int32_t>(n->negative ? -static_cast<std::int64_t>(n->magnitude)
                                               : static_cast<std::int64_t>(n->magnitude));
}

}  // namespace sluice::ratelimit::api::detail
