#include "tracing/proto_text.hpp"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <tuple>
#include <vector>

#include "core/strings.hpp"

namespace sluice::tracing {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

void append_message(std::string& out, const Message& m);

// Go's strconv.AppendFloat(v, 'g', -1): the shortest digits that read back, in exponent form when the
// exponent is under -4 or at least 6 (1234567 is 1.234567e+06); prototext's nan, inf and -inf.
template <typename Float>
void append_float(std::string& out, Float v) {
  if (std::isnan(v)) {
    out += "nan";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "inf" : "-inf";
    return;
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string_view scientific(buf, static_cast<std::size_t>(end - buf));
  const auto e = scientific.rfind('e');
  int exponent = 0;
  std::from_chars(scientific.data() + e + (scientific[e + 1] == '+' ? 2 : 1),
                  scientific.data() + scientific.size(), exponent);
  if (exponent < -4 || exponent >= 6) {
    out += scientific;
    return;
  }
  auto [fixed_end, fixed_ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  out.append(buf, static_cast<std::size_t>(fixed_end - buf));
}

void append_value(std::string& out, const Message& m, const FieldDescriptor& f, int index) {
  const Reflection& r = *m.GetReflection();
  const bool rep = f.is_repeated();
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      core::append_to(out, rep ? r.GetRepeatedInt32(m, &f, index) : r.GetInt32(m, &f));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      core::append_to(out, rep ? r.GetRepeatedInt64(m, &f, index) : r.GetInt64(m, &f));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      core::append_to(out, rep ? r.GetRepeatedUInt32(m, &f, index) : r.GetUInt32(m, &f));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      core::append_to(out, rep ? r.GetRepeatedUInt64(m, &f, index) : r.GetUInt64(m, &f));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      append_float(out, rep ? r.GetRepeatedDouble(m, &f, index) : r.GetDouble(m, &f));
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      append_float(out, rep ? r.GetRepeatedFloat(m, &f, index) : r.GetFloat(m, &f));
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      core::append_to(out, rep ? r.GetRepeatedBool(m, &f, index) : r.GetBool(m, &f));
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const int number = rep ? r.GetRepeatedEnumValue(m, &f, index) : r.GetEnumValue(m, &f);
      const auto* value = f.enum_type()->FindValueByNumber(number);
      if (value != nullptr) {
        out += value->name();
      } else {
        core::append_to(out, number);
      }
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string scratch;
      const auto& s =
          rep ? r.GetRepeatedStringReference(m, &f, index, &scratch) : r.GetStringReference(m, &f, &scratch);
      append_go_quoted(out, s);
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      out.push_back('{');
      append_message(out, rep ? r.GetRepeatedMessage(m, &f, index) : r.GetMessage(m, &f));
      out.push_back('}');
      break;
  }
}

// A map entry's key, compared as Go orders map entries: strings by their bytes, numbers by value.
struct map_key {
  std::string text;
  std::int64_t number = 0;
  std::uint64_t unsigned_number = 0;

  explicit map_key(const Message& entry) {
    const Reflection& r = *entry.GetReflection();
    const FieldDescriptor& f = *entry.GetDescriptor()->map_key();
    switch (f.cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        text = r.GetString(entry, &f);
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        number = r.GetInt32(entry, &f);
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        number = r.GetInt64(entry, &f);
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        unsigned_number = r.GetUInt32(entry, &f);
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        unsigned_number = r.GetUInt64(entry, &f);
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        unsigned_number = r.GetBool(entry, &f) ? 1 : 0;
        break;
      default:
        break;
    }
  }
  bool operator<(const map_key& o) const {
    return std::tie(text, number, unsigned_number) < std::tie(o.text, o.number, o.unsigned_number);
  }
};

void append_message(std::string& out, const Message& m) {
  std::vector<const FieldDescriptor*> fields;
  m.GetReflection()->ListFields(m, &fields);
  // Go prints fields in the order the .proto file declares them (ListFields gives field-number order).
  std::sort(fields.begin(), fields.end(),
            [](const FieldDescriptor* a, const FieldDescriptor* b) { return a->index() < b->index(); });
  bool first = true;
  auto field_start = [&](const FieldDescriptor& f) {
    if (!first) out.push_back(' ');
    first = false;
    out += f.name();
    out.push_back(':');
  };
  for (const auto* f : fields) {
    if (!f->is_repeated()) {
      field_start(*f);
      append_value(out, m, *f, -1);
      continue;
    }
    const int n = m.GetReflection()->FieldSize(m, f);
    std::vector<int> order(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
    if (f->is_map()) {
      std::vector<map_key> keys;
      for (int i = 0; i < n; ++i) keys.emplace_back(m.GetReflection()->GetRepeatedMessage(m, f, i));
      std::sort(order.begin(), order.end(), [&keys](int a, int b) {
        return keys[static_cast<std::size_t>(a)] < keys[static_cast<std::size_t>(b)];
      });
    }
    for (int i : order) {
      field_start(*f);
      append_value(out, m, *f, i);
    }
  }
}

}  // namespace

void append_go_quoted(std::string& out, std::string_view s) {
  out.push_back('"');
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80 ? 1 : core::utf8_sequence(s, i);
    if (n > 1) {  // valid UTF-8 is printed as it is
      out.append(s, i, n);
      i += n;
      continue;
    }
    if (!core::append_short_escape(out, static_cast<char>(c))) {
      if (c < 0x20 || c >= 0x7f) {
        char buf[5];
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
      } else {
        out.push_back(static_cast<char>(c));
      }
    }
    ++i;
  }
  out.push_back('"');
}

std::string go_text(const Message& message) {
  std::string out;
  append_message(out, message);
  return out;
}

}  // namespace sluice::tracing
