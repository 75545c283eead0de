#include "ratelimit/api/plain_json.hpp"

#include <boost/json/serialize.hpp>
#include <charconv>
#include <cmath>
#include <string_view>

namespace sluice::ratelimit::api {

namespace json = boost::json;

namespace {

void write(const json::value& v, std::string& out) {
  switch (v.kind()) {
    case json::kind::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, member] : v.get_object()) {
        if (!first) out += ',';
        first = false;
        out += json::serialize(key);
        out += ':';
        write(member, out);
      }
      out += '}';
      return;
    }
    case json::kind::array: {
      out += '[';
      bool first = true;
      for (const auto& element : v.get_array()) {
        if (!first) out += ',';
        first = false;
        write(element, out);
      }
      out += ']';
      return;
    }
    case json::kind::double_: {
      const double d = v.get_double();
      if (!std::isfinite(d)) {
        out += "null";  // as JSON has no such number
        return;
      }
      char buf[400];  // the longest fixed form of a double is 309 digits and a fraction
      const auto end = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::fixed).ptr;
      out.append(buf, end);
      if (std::string_view(buf, end).find('.') == std::string_view::npos) out += ".0";  // still a double
      return;
    }
    default:
      out += json::serialize(v);  // strings, integers, booleans, null
  }
}

}  // namespace

std::string plain_json(const json::value& v) {
  std::string out;
  write(v, out);
  return out;
}

}  // namespace sluice::ratelimit::api
