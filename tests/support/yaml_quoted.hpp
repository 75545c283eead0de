#pragma once
// A string as a YAML double-quoted scalar, for tests and fuzz harnesses that write YAML back: the bytes as
// they are, except for the escapes double quotes need (quote, backslash, and control characters, which the
// scanner would fold or refuse).

#include <cstdio>
#include <string>
#include <string_view>

namespace sluice::test {

inline std::string yaml_quoted(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char escape[5];
      std::snprintf(escape, sizeof escape, "\\x%02x", c);
      out += escape;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace sluice::test
