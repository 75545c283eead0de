#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ratelimit/api/json_codec.hpp"

namespace sluice::ratelimit::api {

namespace {

// Indexed by enum number: the response's Unit has WEEK = 7.
constexpr std::array<std::string_view, 8> response_units{"UNKNOWN", "SECOND", "MINUTE", "HOUR",
                                                         "DAY",     "MONTH",  "YEAR",   "WEEK"};
constexpr std::array<std::string_view, 3> codes{"UNKNOWN", "OK", "OVER_LIMIT"};

// Writes a JSON object's members, adding the commas.
class object_writer {
 public:
  explicit object_writer(std::string& out) : out_(out) { out_ += '{'; }
  std::string& key(std::string_view name) {
    if (!first_) out_.push_back(',');
    first_ = false;
    out_.push_back('"');
    out_.append(name);
    out_.append("\":", 2);
    return out_;
  }
  void close() { out_ += '}'; }

 private:
  std::string& out_;
  bool first_ = true;
};

// Escapes as Go's protojson does: quotes, backslashes and control characters; everything else verbatim.
void append_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  std::size_t run = 0;  // start of the pending unescaped run
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s, run, i - run);
    run = i + 1;
    // Go's short forms where they exist, else \u00XX with lower-case hex.
    static constexpr std::string_view short_from = "\"\\\b\f\n\r\t", short_to = "\"\\bfnrt";
    if (const auto k = short_from.find(static_cast<char>(c)); k != std::string_view::npos) {
      out += {'\\', short_to[k]};
    } else {
      out += {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xf]};
    }
  }
  out.append(s, run);
  out += '"';
}

void append_uint(std::string& out, std::uint64_t v) {
  char buf[20];
  // append(pointer, size): the (first, last) overload goes through the slower replace path.
  out.append(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, v).ptr - buf));
}

// protojson writes a known enum value by name and an unknown one by number.
template <std::size_t N>
void append_enum(std::string& out, const std::array<std::string_view, N>& names, int value) {
  if (value >= 0 && static_cast<std::size_t>(value) < N) {
    append_string(out, names[static_cast<std::size_t>(value)]);
  } else {
    char buf[12];
    out.append(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, value).ptr - buf));
  }
}

// Duration in the proto3 JSON form: "58s", "1.500s", "0.000001s" (0, 3, 6 or 9 fractional digits).
void append_duration(std::string& out, const google::protobuf::Duration& d) {
  const std::int64_t seconds = d.seconds();
  const std::int64_t nanos = d.nanos();
  out += '"';
  if (seconds < 0 || nanos < 0) out += '-';
  append_uint(out,
              seconds < 0 ? 0 - static_cast<std::uint64_t>(seconds) : static_cast<std::uint64_t>(seconds));
  if (nanos != 0) {
    auto fraction = static_cast<std::uint32_t>(nanos < 0 ? -nanos : nanos);
    int digits = 9;
    for (; digits > 3 && fraction % 1000 == 0; digits -= 3) fraction /= 1000;
    char buf[10] = {'.'};
    for (int i = digits; i > 0; --i, fraction /= 10) buf[i] = static_cast<char>('0' + fraction % 10);
    out.append(buf, static_cast<std::size_t>(digits) + 1);
  }
  out += "s\"";
}

void append_headers(object_writer& object, std::string_view name,
                    const google::protobuf::RepeatedPtrField<envoy::config::core::v3::HeaderValue>& headers) {
  if (headers.empty()) return;
  std::string& out = object.key(name);
  out += '[';
  for (int i = 0; i < headers.size(); ++i) {
    if (i > 0) out += ',';
    object_writer header(out);
    if (!headers[i].key().empty()) append_string(header.key("key"), headers[i].key());
    if (!headers[i].value().empty()) append_string(header.key("value"), headers[i].value());
    header.close();
  }
  out += ']';
}

// A double as Go's protojson (and encoding/json) writes it: the shortest digits that read back the same, in
// plain notation from 1e-6 up to 1e21 (padded with zeros: 2^60 is 1152921504606847000, not the exact binary
// value) and in exponent notation ("1e-7", "1e+21") outside.
void append_double(std::string& out, double v) {
  char buf[32];
  const auto* end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific).ptr;
  std::string_view text(buf, static_cast<std::size_t>(end - buf));  // [-]d[.ddd]e(+|-)XX
  const auto e = text.find('e');
  int exponent = 0;
  std::from_chars(text.data() + e + (text[e + 1] == '+' ? 2 : 1), text.data() + text.size(), exponent);
  const double magnitude = std::fabs(v);
  if (magnitude != 0 && (magnitude < 1e-6 || magnitude >= 1e21)) {
    out.append(text.substr(0, e + 2));  // mantissa, 'e' and sign; the exponent without its leading zero
    append_uint(out, static_cast<std::uint64_t>(exponent < 0 ? -exponent : exponent));
    return;
  }
  std::string_view mantissa = text.substr(0, e);
  if (mantissa.front() == '-') {
    out += '-';
    mantissa.remove_prefix(1);
  }
  std::string digits{mantissa.front()};
  if (mantissa.size() > 2) digits.append(mantissa.substr(2));  // past "d."
  if (v == 0) exponent = 0;
  const int point = exponent + 1;  // digits before the decimal point
  if (point <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-point), '0');
    out += digits;
  } else if (static_cast<std::size_t>(point) >= digits.size()) {
    out += digits;
    out.append(static_cast<std::size_t>(point) - digits.size(), '0');
  } else {
    out.append(digits, 0, static_cast<std::size_t>(point));
    out += '.';
    out.append(digits, static_cast<std::size_t>(point));
  }
}

void append_value(std::string& out, const google::protobuf::Value& value);

void append_struct(std::string& out, const google::protobuf::Struct& object) {
  // protobuf maps have no order; protojson sorts the keys, which also keeps the output stable.
  std::vector<const std::string*> keys;
  keys.reserve(static_cast<std::size_t>(object.fields_size()));
  for (const auto& [key, value] : object.fields()) keys.push_back(&key);
  std::ranges::sort(keys, [](const std::string* a, const std::string* b) { return *a < *b; });
  out += '{';
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (i > 0) out += ',';
    append_string(out, *keys[i]);
    out += ':';
    append_value(out, object.fields().at(*keys[i]));
  }
  out += '}';
}

void append_value(std::string& out, const google::protobuf::Value& value) {
  switch (value.kind_case()) {
    case google::protobuf::Value::kNumberValue:
      return append_double(out, value.number_value());
    case google::protobuf::Value::kStringValue:
      return append_string(out, value.string_value());
    case google::protobuf::Value::kBoolValue:
      out += value.bool_value() ? "true" : "false";
      return;
    case google::protobuf::Value::kStructValue:
      return append_struct(out, value.struct_value());
    case google::protobuf::Value::kListValue: {
      out += '[';
      const auto& values = value.list_value().values();
      for (int i = 0; i < values.size(); ++i) {
        if (i > 0) out += ',';
        append_value(out, values[i]);
      }
      out += ']';
      return;
    }
    default:
      out += "null";
  }
}

void append_status(std::string& out, const rls_response::DescriptorStatus& status) {
  object_writer object(out);
  if (status.code() != 0) append_enum(object.key("code"), codes, status.code());
  if (status.has_current_limit()) {
    const auto& limit = status.current_limit();
    object_writer current(object.key("currentLimit"));
    if (!limit.name().empty()) append_string(current.key("name"), limit.name());
    if (limit.requests_per_unit() != 0)
      append_uint(current.key("requestsPerUnit"), limit.requests_per_unit());
    if (limit.unit() != 0) append_enum(current.key("unit"), response_units, limit.unit());
    current.close();
  }
  if (status.limit_remaining() != 0) append_uint(object.key("limitRemaining"), status.limit_remaining());
  if (status.has_duration_until_reset())
    append_duration(object.key("durationUntilReset"), status.duration_until_reset());
  object.close();
}

}  // namespace

std::string response_to_json(const rls_response& response) {
  std::string out;
  out.reserve(32 + 128 * static_cast<std::size_t>(response.statuses_size()) +
              64 * static_cast<std::size_t>(response.response_headers_to_add_size() +
                                            response.request_headers_to_add_size()));
  object_writer object(out);
  if (response.overall_code() != 0) append_enum(object.key("overallCode"), codes, response.overall_code());
  if (!response.statuses().empty()) {
    object.key("statuses") += '[';
    for (int i = 0; i < response.statuses_size(); ++i) {
      if (i > 0) out += ',';
      append_status(out, response.statuses(i));
    }
    out += ']';
  }
  append_headers(object, "responseHeadersToAdd", response.response_headers_to_add());
  append_headers(object, "requestHeadersToAdd", response.request_headers_to_add());
  if (response.has_dynamic_metadata())
    append_struct(object.key("dynamicMetadata"), response.dynamic_metadata());
  object.close();
  return out;
}

}  // namespace sluice::ratelimit::api
