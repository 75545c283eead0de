#include "core/problem.hpp"
#include "ratelimit/api/json_codec.hpp"
#include "ratelimit/api/json_number.hpp"

#include <array>
#include <charconv>
#include <cstdint>
#include <limits>

#include <boost/json/basic_parser_impl.hpp>

namespace sluice::ratelimit::api {

namespace {

using detail::to_int32;
using detail::to_unsigned;

using descriptor = envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
using request_unit = envoy::type::v3::RateLimitUnit;

// Indexed by enum number; RateLimitUnit (the request side) has no WEEK.
constexpr std::array<std::string_view, 7> request_units{"UNKNOWN", "SECOND", "MINUTE", "HOUR",
                                                        "DAY",     "MONTH",  "YEAR"};

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
  unit,
  negative_hits
};

// What each field's value must be, indexed by `field`, for type errors.
constexpr std::array<std::string_view, 12> expectations{
    "",
    "expected a string",                         // domain
    "expected an array",                         // descriptors
    "expected an unsigned 32-bit integer",       // request hits_addend
    "expected an array",                         // entries
    "expected an object",                        // limit
    "expected an unsigned 64-bit integer",       // descriptor hits_addend (UInt64Value)
    "expected a string",                         // key
    "expected a string",                         // value
    "expected an unsigned 32-bit integer",       // requests_per_unit
    "expected a unit name or a 32-bit integer",  // unit
    "expected a boolean"};                       // is_negative_hits

struct field_name {
  std::string_view proto;
  std::string_view json;  // lowerCamelCase; equal to `proto` for one-word names
  field id;
};

constexpr std::array<field_name, 3> request_fields{{{"domain", "domain", field::domain},
                                                    {"descriptors", "descriptors", field::descriptors},
                                                    {"hits_addend", "hitsAddend", field::request_hits}}};
constexpr std::array<field_name, 4> descriptor_fields{
    {{"entries", "entries", field::entries},
     {"limit", "limit", field::limit},
     {"hits_addend", "hitsAddend", field::descriptor_hits},
     {"is_negative_hits", "isNegativeHits", field::negative_hits}}};
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

  bool on_bool(bool b, error_code& ec) {
    if (field_ != field::negative_hits) return type_error(ec);
    desc_->set_is_negative_hits(b);
    field_ = field::none;
    return true;
  }

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

}  // namespace

core::problem parse_request_json(std::string_view body, rls_request& out) {
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

}  // namespace sluice::ratelimit::api
