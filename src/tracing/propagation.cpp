#include "tracing/propagation.hpp"

#include <algorithm>
#include <span>

#include "core/strings.hpp"

namespace sluice::tracing {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Lower-case hex of exactly out.size() bytes; false otherwise.
bool parse_hex(std::string_view text, std::span<std::uint8_t> out) {
  if (text.size() != out.size() * 2) return false;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return true;
}

template <std::size_t N>
bool all_zero(const std::array<std::uint8_t, N>& bytes) {
  return std::ranges::all_of(bytes, [](std::uint8_t b) { return b == 0; });
}

// A trace id of 32 hex digits, or of 16 (B3's 64-bit ids, padded on the left with zeros).
bool parse_trace_id(std::string_view text, std::array<std::uint8_t, 16>& out, bool allow_64_bit) {
  out = {};
  if (allow_64_bit && text.size() == 16) return parse_hex(text, std::span(out).subspan(8)) && !all_zero(out);
  return parse_hex(text, out) && !all_zero(out);
}

bool parse_span_id(std::string_view text, std::array<std::uint8_t, 8>& out) {
  return parse_hex(text, out) && !all_zero(out);
}

bool key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '*' || c == '/';
}

// W3C tracestate key: simple-key (a lower-case letter first), or tenant-id@system-id (the tenant may start
// with a digit).
bool valid_tracestate_key(std::string_view key) {
  const auto at = key.find('@');
  auto part_ok = [](std::string_view part, std::size_t max, bool digit_first) {
    if (part.empty() || part.size() > max) return false;
    const char first = part.front();
    if (!((first >= 'a' && first <= 'z') || (digit_first && first >= '0' && first <= '9'))) return false;
    return std::ranges::all_of(part, key_char);
  };
  if (at == std::string_view::npos) return part_ok(key, 256, false);
  return part_ok(key.substr(0, at), 241, true) && part_ok(key.substr(at + 1), 14, false);
}

// W3C tracestate value: 1 to 256 printable characters but ',' and '=', not ending with a space.
bool valid_tracestate_value(std::string_view value) {
  if (value.empty() || value.size() > 256 || value.back() == ' ') return false;
  return std::ranges::all_of(value, [](char c) { return c >= 0x20 && c <= 0x7e && c != ',' && c != '='; });
}

bool valid_tracestate(std::string_view tracestate) {
  std::size_t members = 0;
  for (auto member : core::split(tracestate, ',')) {
    member = core::trim_space(member);
    if (member.empty()) continue;  // empty list members are allowed
    const auto eq = member.find('=');
    if (eq == std::string_view::npos || !valid_tracestate_key(member.substr(0, eq)) ||
        !valid_tracestate_value(member.substr(eq + 1)) || ++members > 32) {
      return false;
    }
  }
  return true;
}

char hex_digit(unsigned v) {
  return "0123456789abcdef"[v & 0xf];
}

template <std::size_t N>
void append_hex(std::string& out, const std::array<std::uint8_t, N>& bytes) {
  for (auto b : bytes) {
    out += hex_digit(b >> 4);
    out += hex_digit(b);
  }
}

}  // namespace

std::optional<span_context> parse_traceparent(std::string_view traceparent, std::string_view tracestate) {
  traceparent = core::trim_space(traceparent);
  // version "-" trace id "-" span id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2.
  if (traceparent.size() < 55) return std::nullopt;
  std::array<std::uint8_t, 1> version{}, flags{};
  if (!parse_hex(traceparent.substr(0, 2), version) || version[0] == 0xff) return std::nullopt;
  if (traceparent[2] != '-' || traceparent[35] != '-' || traceparent[52] != '-') return std::nullopt;
  // Version 00 is exactly 55 characters; a later version may add fields after a '-'.
  if (traceparent.size() > 55 && (version[0] == 0 || traceparent[55] != '-')) return std::nullopt;
  span_context out;
  if (!parse_trace_id(traceparent.substr(3, 32), out.trace_id, false) ||
      !parse_span_id(traceparent.substr(36, 16), out.span_id) ||
      !parse_hex(traceparent.substr(53, 2), flags)) {
    return std::nullopt;
  }
  out.sampled = (flags[0] & 1) != 0;
  if (valid_tracestate(tracestate)) out.tracestate = std::string(core::trim_space(tracestate));
  return out;
}

std::optional<span_context> parse_b3_single(std::string_view b3) {
  const auto fields = core::split(core::trim_space(b3), '-');
  if (fields.size() < 2 || fields.size() > 4) return std::nullopt;  // "0", "1" or "d" alone: no context
  span_context out;
  if (!parse_trace_id(fields[0], out.trace_id, true) || !parse_span_id(fields[1], out.span_id))
    return std::nullopt;
  if (fields.size() >= 3) {
    if (fields[2] == "1" || fields[2] == "d") {
      out.sampled = true;
    } else if (fields[2] == "0") {
      out.sampled = false;
    } else {
      return std::nullopt;
    }
  }
  std::array<std::uint8_t, 8> parent{};
  if (fields.size() == 4 && !parse_span_id(fields[3], parent)) return std::nullopt;
  return out;
}

std::optional<span_context> parse_b3_multi(std::string_view trace_id, std::string_view span_id,
                                           std::string_view sampled, std::string_view flags) {
  span_context out;
  if (!parse_trace_id(core::trim_space(trace_id), out.trace_id, true) ||
      !parse_span_id(core::trim_space(span_id), out.span_id)) {
    return std::nullopt;
  }
  sampled = core::trim_space(sampled);
  if (core::trim_space(flags) == "1" || sampled == "1" || sampled == "true") {
    out.sampled = true;
  } else if (sampled == "0" || sampled == "false") {
    out.sampled = false;
  } else if (!sampled.empty()) {
    return std::nullopt;
  }
  return out;
}

std::optional<span_context> extract(const header_lookup& header) {
  auto get = [&](std::string_view name) { return header(name).value_or(std::string_view{}); };
  std::optional<span_context> found;
  if (auto traceparent = header("traceparent")) found = parse_traceparent(*traceparent, get("tracestate"));
  std::optional<span_context> b3;
  if (auto single = header("b3")) b3 = parse_b3_single(*single);
  if (!b3 && header("x-b3-traceid")) {
    b3 = parse_b3_multi(get("x-b3-traceid"), get("x-b3-spanid"), get("x-b3-sampled"), get("x-b3-flags"));
  }
  return b3 ? b3 : found;
}

std::string format_traceparent(const span_context& context) {
  std::string out = "00-";
  append_hex(out, context.trace_id);
  out += '-';
  append_hex(out, context.span_id);
  out += context.sampled.value_or(false) ? "-01" : "-00";
  return out;
}

}  // namespace sluice::tracing
