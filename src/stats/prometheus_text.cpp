#include "stats/prometheus_text.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>

namespace sluice::stats {

namespace {

bool is_name_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Length of the well-formed UTF-8 sequence starting at s[i] (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF), or 0 when there is none.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = byte(0);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size() || byte(1) < lo || byte(1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if ((byte(k) & 0xC0) != 0x80) return 0;
  return n;
}

}  // namespace

std::string escape_metric_name(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 1);
  if (!name.empty() && name[0] >= '0' && name[0] <= '9') out.push_back('_');
  bool after_dash = false;
  for (std::size_t i = 0; i < name.size();) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (is_name_char(c)) {
      out.push_back(static_cast<char>(c));
      after_dash = false;
      ++i;
      continue;
    }
    // As Go's range over a string: one replacement per character, not per byte.
    const std::size_t n = std::max<std::size_t>(1, utf8_length(name, i));
    if (!(c == '-' && after_dash)) out.push_back('_');
    after_dash = c == '-';
    i += n;
  }
  return out;
}

void append_label_value(std::string& out, std::string_view value) {
  for (std::size_t i = 0; i < value.size();) {
    const char c = value[i];
    const std::size_t n = utf8_length(value, i);
    if (n == 0) {
      out.append("\xEF\xBF\xBD");
      ++i;
      continue;
    }
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == '"') {
      out.append("\\\"");
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.append(value.substr(i, n));
    }
    i += n;
  }
}

void append_help(std::string& out, std::string_view text) {
  for (char c : text) {
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
}

void append_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out.append("NaN");
    return;
  }
  if (std::isinf(v)) {
    out.append(v > 0 ? "+Inf" : "-Inf");
    return;
  }
  char buf[32];
  std::to_chars_result r;
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {
    r = std::to_chars(buf, buf + sizeof buf, static_cast<std::int64_t>(v));
  } else {
    r = std::to_chars(buf, buf + sizeof buf, v);
  }
  out.append(buf, r.ptr);
}

}  // namespace sluice::stats
