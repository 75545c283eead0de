#include "core/strings.hpp"
#include "holidays/envelope.hpp"

namespace sluice::holidays {

namespace {

// Character data needs only these three escaped; apostrophes and quotes stay readable.
void append_escaped(std::string& out, std::string_view text) {
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      default:
        out.push_back(c);
    }
  }
}

void append_element(std::string& out, std::string_view indent, std::string_view tag,
                    const std::optional<std::string>& value) {
  out += core::cat(indent, "<", tag, ">");
  if (value) append_escaped(out, *value);
  out += core::cat("</", tag, ">\n");
}

}  // namespace

std::string xml_data(const std::vector<holiday>& holidays) {
  if (holidays.empty()) return std::string(xml_no_data);
  std::string out = "<data>\n";
  for (const auto& h : holidays) {
    out += "    <item>\n";
    append_element(out, "      ", "name", h.name);
    append_element(out, "      ", "date", h.date);
    out += "    </item>\n";
  }
  out += "  </data>";
  return out;
}

std::string xml_document(const meta& m, std::string_view data) {
  std::string out;
  out.reserve(data.size() + 320);
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<response>\n  <meta>\n    <requests>";
  core::append_to(out, m.requests);
  out += "</requests>\n    <timestamp>";
  core::append_to(out, m.timestamp);
  out += "</timestamp>\n    <status>";
  core::append_to(out, m.status);
  out += "</status>\n    <message>";
  append_escaped(out, m.message);
  out += "</message>\n    <method_id>";
  core::append_to(out, method_id);
  out += "</method_id>\n    <version>";
  out += api_version;
  out += "</version>\n    <method></method>\n  </meta>\n  ";
  out += data;
  out += "\n</response>\n";
  return out;
}

}  // namespace sluice::holidays
