#include <boost/json/serialize.hpp>
#include <boost/json/string_view.hpp>

#include "core/strings.hpp"
#include "holidays/envelope.hpp"

namespace sluice::holidays {

namespace {

void append_string(std::string& out, const std::optional<std::string>& value) {
  if (!value) {
    out += "null";
    return;
  }
  // Boost.JSON escapes quotes, backslashes and control characters and keeps UTF-8 as it is; U+2028 and U+2029
  // are escaped too, as JSONP bodies are JavaScript, where (before ES2019) they end a string literal.
  std::string text = boost::json::serialize(boost::json::string_view(*value));
  for (std::size_t at = 0; (at = text.find("\xE2\x80", at)) != std::string::npos; ++at) {
    if (at + 2 < text.size() && (text[at + 2] == '\xA8' || text[at + 2] == '\xA9'))
      text.replace(at, 3, text[at + 2] == '\xA8' ? "\\u2028" : "\\u2029");
  }
  out += text;
}

}  // namespace

std::string json_data(const std::vector<holiday>& holidays) {
  if (holidays.empty()) return "[\n\n  ]";
  std::string out = "[";
  for (std::size_t i = 0; i < holidays.size(); ++i) {
    out += i == 0 ? "\n    {\n      \"name\":" : ",\n    {\n      \"name\":";
    append_string(out, holidays[i].name);
    out += ",\n      \"date\":";
    append_string(out, holidays[i].date);
    out += "\n    }";
  }
  out += "\n  ]";
  return out;
}

std::string json_document(const meta& m, std::string_view data) {
  std::string out;
  out.reserve(data.size() + 256);
  out += "{\n  \"meta\":{\n    \"requests\":";
  core::append_to(out, m.requests);
  out += ",\n    \"timestamp\":";
  core::append_to(out, m.timestamp);
  out += ",\n    \"status\":";
  core::append_to(out, m.status);
  out += ",\n    \"message\":";
  out += boost::json::serialize(boost::json::string_view(m.message.data(), m.message.size()));
  out += ",\n    \"method_id\":";
  core::append_to(out, method_id);
  out += ",\n    \"version\":";
  out += api_version;
  out += ",\n    \"method\":{\n\n    }\n  },\n  \"data\":";
  out += data;
  out += "\n}";
  return out;
}

}  // namespace sluice::holidays
