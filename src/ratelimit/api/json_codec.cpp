#include "ratelimit/api/json_codec.hpp"

#include <array>
#include <charconv>
#include <cstdint>
#include <limits>

#include <boost/json/basic_parser_impl.hpp>

namespace sluice::ratelimit::api {

namespace {

using descriptor = envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
using request_unit = envoy::type::v3::RateLimitUnit;

// Indexed by enum number. RateLimitUnit (request side) has no WEEK; the response's Unit has WEEK = 7.
constexpr std::array<std::string_view, 7> request_units{"UNKNOWN", "SECOND", "MINUTE", "HOUR",
                                                        "DAY",     "MONTH",  "YEAR"};
constexpr std::array<std::string_view, 8> response_units{"UNKNOWN", "SECOND", "MINUTE", "HOUR",
                                                         "DAY",     "MONTH",  "YEAR",   "WEEK"};
constexpr std::array<std::string_view, 3> codes{"UNKNOWN", "OK", "OVER_LIMIT"};

struct json_integer {
  bool negative = false;
  std::uint64_t magnitude = 0;
};

// Go protojson's integer rule (parseNumberParts + normalizeToIntString): a JSON number is an integer when its
// exponent shifts away every non-zero fractional digit ("2.0", "1e2", "100e-2" are; "1.5" is not), and the
// shifted form has at most 20 digits. `text` must be exactly one JSON number; numbers in strings use it too.
std::optional<json_integer> to_integer(std::string_view text) {
  std::size_t i = 0;
  auto digit = [&](std::size_t k) { return k < text.size() && text[k] >= '0' && text[k] <= '9'; };
  json_integer result;
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
  if (int_part.empty() && frac_part.empty()) return json_integer{};

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

enum class where : std::uint8_t { root, request, descriptors, descriptor, entries, entry, limit, done };

enum class field : std::uint8_t {
  none,
  domain,
  descriptors,
  request_hits,
  entries,
  limit,
  descriptor_hits,
  key,
  value,
  requests_per_unit,
  unit
};

// What each field's value must be, indexed by `field`, for type errors.
constexpr std::array<std::string_view, 11> expectations{
    "",
    "expected a string",                          // domain
    "expected an array",                          // descriptors
    "expected an unsigned 32-bit integer",        // request hits_addend
    "expected an array",                          // entries
    "expected an object",                         // limit
    "expected an unsigned 64-bit integer",        // descriptor hits_addend (UInt64Value)
    "expected a string",                          // key
    "expected a string",                          // value
    "expected an unsigned 32-bit integer",        // requests_per_unit
    "expected a unit name or a 32-bit integer"};  // unit

struct field_name {
  std::string_view proto;
  std::string_view json;  // lowerCamelCase; equal to `proto` for one-word names
  field id;
};

constexpr std::array<field_name, 3> request_fields{{{"domain", "domain", field::domain},
                                                    {"descriptors", "descriptors", field::descriptors},
                                                    {"hits_addend", "hitsAddend", field::request_hits}}};
constexpr std::array<field_name, 3> descriptor_fields{
    {{"entries", "entries", field::entries},
     {"limit", "limit", field::limit},
     {"hits_addend", "hitsAddend", field::descriptor_hits}}};
constexpr std::array<field_name, 2> entry_fields{
    {{"key", "key", field::key}, {"value", "value", field::value}}};
constexpr std::array<field_name, 2> limit_fields{
    {{"requests_per_unit", "requestsPerUnit", field::requests_per_unit}, {"unit", "unit", field::unit}}};

// SAX handler for boost::json::basic_parser: fills the request as tokens arrive, so the first problem in
// document order is the one reported (as protojson's streaming decoder does), duplicate keys stay visible
// (a DOM keeps only the last), and no JSON tree is allocated.
class request_reader {
 public:
  static constexpr std::size_t max_array_size = std::numeric_limits<std::size_t>::max();
  static constexpr std::size_t max_object_size = std::numeric_limits<std::size_t>::max();
  static constexpr std::size_t max_string_size = std::numeric_limits<std::size_t>::max();
  static constexpr std::size_t max_key_size = std::numeric_limits<std::size_t>::max();

  using error_code = boost::json::error_code;
  using string_view = boost::json::string_view;

  explicit request_reader(rls_request& out) : out_(out) {}

  const std::string& error() const { return error_; }

  bool on_document_begin(error_code&) { return true; }
  bool on_document_end(error_code&) { return true; }
  bool on_comment_part(string_view, error_code&) { return true; }  // comments are rejected by parse_options
  bool on_comment(string_view, error_code&) { return true; }

  bool on_object_begin(error_code& ec) {
    if (where_ == where::root) {
      where_ = where::request;
    } else if (where_ == where::descriptors) {
      desc_ = out_.add_descriptors();
      enter(where::descriptor);
    } else if (where_ == where::entries) {
      entry_ = desc_->add_entries();
      enter(where::entry);
    } else if (field_ == field::limit) {
      limit_ = desc_->mutable_limit();
      enter(where::limit);
    } else {
      return type_error(ec);
    }
    return true;
  }

  bool on_object_end(std::size_t, error_code&) {
    where_ = where_ == where::request      ? where::done
             : where_ == where::descriptor ? where::descriptors
             : where_ == where::entry      ? where::entries
                                           : where::descriptor;
    return true;
  }

  bool on_array_begin(error_code& ec) {
    if (field_ == field::descriptors) {
      enter(where::descriptors);
    } else if (field_ == field::entries) {
      enter(where::entries);
    } else {
      return type_error(ec);
    }
    return true;
  }

  bool on_array_end(std::size_t, error_code&) {
    where_ = where_ == where::descriptors ? where::request : where::descriptor;
    return true;
  }

  bool on_key_part(string_view s, std::size_t, error_code&) {
    key_.append(s.data(), s.size());
    return true;
  }

  bool on_key(string_view s, std::size_t, error_code& ec) {
    std::string_view key(s.data(), s.size());
    if (!key_.empty()) key = key_.append(key);
    const bool ok = where_ == where::request      ? find_field(request_fields, key, ec)
                    : where_ == where::descriptor ? find_field(descriptor_fields, key, ec)
                    : where_ == where::entry      ? find_field(entry_fields, key, ec)
                                                  : find_field(limit_fields, key, ec);
    key_.clear();
    return ok;
  }

  bool on_string_part(string_view s, std::size_t, error_code& ec) { return on_text(s, false, ec); }
  bool on_string(string_view s, std::size_t, error_code& ec) { return on_text(s, true, ec); }

  bool on_number_part(string_view s, error_code&) {
    number_.append(s.data(), s.size());
    return true;
  }
  bool on_int64(std::int64_t, string_view s, error_code& ec) { return on_number(s, ec); }
  bool on_uint64(std::uint64_t, string_view s, error_code& ec) { return on_number(s, ec); }
  bool on_double(double, string_view s, error_code& ec) { return on_number(s, ec); }

  bool on_bool(bool, error_code& ec) { return type_error(ec); }

  bool on_null(error_code& ec) {
    if (field_ == field::none) return type_error(ec);  // null as the body or as an array element
    field_ = field::none;                              // null leaves the field unset, as in protojson
    return true;
  }

 private:
  void enter(where w) {
    where_ = w;
    field_ = field::none;
    seen_[static_cast<std::size_t>(w)] = 0;
  }

  template <std::size_t N>
  bool find_field(const std::array<field_name, N>& fields, std::string_view key, error_code& ec) {
    for (std::size_t i = 0; i < N; ++i) {
      if (key != fields[i].json && key != fields[i].proto) continue;
      // Both spellings name one field, so giving it twice is a duplicate whatever the spelling.
      auto& seen = seen_[static_cast<std::size_t>(where_)];
      if (seen & (1u << i))
        return fail(prefix(object_path()) + "duplicate field '" + std::string(key) + "'", ec);
      seen |= 1u << i;
      field_ = fields[i].id;
      name_ = key == fields[i].json ? fields[i].json : fields[i].proto;
      return true;
    }
    return fail(prefix(object_path()) + "unknown field '" + std::string(key) + "'", ec);
  }

  // Strings may arrive in parts (the parser flushes around escapes); string fields append in place.
  bool on_text(string_view s, bool last, error_code& ec) {
    if (!target_) {
      switch (field_) {
        case field::domain:
          target_ = out_.mutable_domain();
          break;
        case field::key:
          target_ = entry_->mutable_key();
          break;
        case field::value:
          target_ = entry_->mutable_value();
          break;
        case field::request_hits:
        case field::descriptor_hits:
        case field::requests_per_unit:
        case field::unit:
          text_.clear();
          target_ = &text_;
          break;
        default:
          return type_error(ec);
      }
    }
    target_->append(s.data(), s.size());
    if (!last) return true;
    const bool scalar = target_ == &text_;
    target_ = nullptr;
    if (!scalar) {
      field_ = field::none;
      return true;
    }
    return on_scalar(text_, true, ec);
  }

  bool on_number(string_view s, error_code& ec) {
    std::string_view text(s.data(), s.size());
    if (!number_.empty()) text = number_.append(text);
    const bool ok = on_scalar(text, false, ec);
    number_.clear();
    return ok;
  }

  // A number, or a string holding one (64-bit and, in protojson, all integer types may be quoted).
  bool on_scalar(std::string_view text, bool quoted, error_code& ec) {
    constexpr std::uint64_t max32 = std::numeric_limits<std::uint32_t>::max();
    constexpr std::uint64_t max64 = std::numeric_limits<std::uint64_t>::max();
    switch (field_) {
      case field::request_hits: {
        const auto v = to_unsigned(text, max32);
        if (!v) return type_error(ec);
        out_.set_hits_addend(static_cast<std::uint32_t>(*v));
        break;
      }
      case field::descriptor_hits: {
        const auto v = to_unsigned(text, max64);
        if (!v) return type_error(ec);
        desc_->mutable_hits_addend()->set_value(*v);  // presence matters: 0 means "check only"
        break;
      }
      case field::requests_per_unit: {
        const auto v = to_unsigned(text, max32);
        if (!v) return type_error(ec);
        limit_->set_requests_per_unit(static_cast<std::uint32_t>(*v));
        break;
      }
      case field::unit: {
        // Enum names must match exactly; numbers are any int32 (proto3 enums are open).
        std::optional<std::int32_t> v;
        if (quoted) {
          for (std::size_t i = 0; i < request_units.size(); ++i) {
            if (text == request_units[i]) v = static_cast<std::int32_t>(i);
          }
          if (!v) return fail(field_path() + ": unknown unit '" + std::string(text) + "'", ec);
        } else {
          v = to_int32(text);
          if (!v) return type_error(ec);
        }
        limit_->set_unit(static_cast<request_unit>(*v));
        break;
      }
      default:
        return type_error(ec);
    }
    field_ = field::none;
    return true;
  }

  static std::string prefix(std::string path) { return path.empty() ? path : path + ": "; }

  std::string descriptor_path() const {
    return "descriptors[" + std::to_string(out_.descriptors_size() - 1) + "]";
  }

  std::string object_path() const {
    switch (where_) {
      case where::descriptor:
        return descriptor_path();
      case where::entry:
        return descriptor_path() + ".entries[" + std::to_string(desc_->entries_size() - 1) + "]";
      case where::limit:
        return descriptor_path() + ".limit";
      default:
        return {};
    }
  }

  std::string field_path() const {
    const std::string path = object_path();
    return path.empty() ? std::string(name_) : path + "." + std::string(name_);
  }

  // A value of the wrong JSON type for the current position.
  bool type_error(error_code& ec) {
    if (where_ == where::root) return fail("request body must be a JSON object", ec);
    if (where_ == where::descriptors) {
      return fail("descriptors[" + std::to_string(out_.descriptors_size()) + "]: expected an object", ec);
    }
    if (where_ == where::entries) {
      return fail(
          descriptor_path() + ".entries[" + std::to_string(desc_->entries_size()) + "]: expected an object",
          ec);
    }
    const std::string_view expected = expectations[static_cast<std::size_t>(field_)];
    return fail(field_path() + ": " + std::string(expected), ec);
  }

  bool fail(std::string message, error_code& ec) {
    error_ = std::move(message);
    ec = boost::json::make_error_code(boost::json::error::exception);
    return false;
  }

  rls_request& out_;
  where where_ = where::root;
  field field_ = field::none;       // the field whose value comes next
  std::string_view name_;           // that field's name as written
  std::array<unsigned, 8> seen_{};  // per object level (by `where`): fields already given, by table index
  descriptor* desc_ = nullptr;
  descriptor::Entry* entry_ = nullptr;
  descriptor::RateLimitOverride* limit_ = nullptr;
  std::string* target_ = nullptr;  // string being assembled from parts
  std::string key_;
  std::string text_;
  std::string number_;
  std::string error_;
};

// Writes a JSON object's members, adding the commas.
class object_writer {
 public:
  explicit object_writer(std::string& out) : out_(out) { out_ += '{'; }
  std::string& key(std::string_view name) {
    out_ += first_ ? "\"" : ",\"";
    first_ = false;
    out_ += name;
    out_ += "\":";
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
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  out.append(buf, end);
}

// protojson writes a known enum value by name and an unknown one by number.
template <std::size_t N>
void append_enum(std::string& out, const std::array<std::string_view, N>& names, int value) {
  if (value >= 0 && static_cast<std::size_t>(value) < N) {
    append_string(out, names[static_cast<std::size_t>(value)]);
  } else {
    char buf[12];
    out.append(buf, std::to_chars(buf, buf + sizeof buf, value).ptr);
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

std::optional<std::string> parse_request_json(std::string_view body, rls_request& out) {
  out.Clear();
  if (body.empty()) return "request body is empty";
  boost::json::basic_parser<request_reader> parser(boost::json::parse_options{}, out);
  boost::json::error_code ec;
  const std::size_t used = parser.write_some(false, body.data(), body.size(), ec);
  if (!parser.handler().error().empty()) return parser.handler().error();
  if (!ec && used != body.size()) ec = boost::json::make_error_code(boost::json::error::extra_data);
  if (ec) return "invalid JSON: " + ec.message();
  return std::nullopt;
}

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
  object.close();
  return out;
}

}  // namespace sluice::ratelimit::api
