// libFuzzer: query strings. The input, split at its first 0xFF byte into a parameter name and a request
// target, is used twice: the target as it is (no crash; a found value is no longer than the target, and
// nothing is found without a '?'), and a target built by the harness with the rest of the input
// percent-encoded as the name's value, in front of the arbitrary query: the value comes back exactly.
//
// Build and run: scripts/fuzz query [seconds]

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "net/http/query.hpp"

namespace {

using sluice::net::http::query_param;

void check(bool ok) {
  if (!ok) std::abort();
}

// RFC 3986 unreserved characters stay; every other byte becomes %XY (mixed case hex, both must decode).
std::string percent_encoded(std::string_view s) {
  static constexpr char upper[] = "0123456789ABCDEF";
  static constexpr char lower[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      const char* hex = i % 2 == 0 ? upper : lower;
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto split = bytes.find('\xff');
  const std::string_view name =
      split == std::string_view::npos ? std::string_view("key") : bytes.substr(0, split);
  const std::string_view rest = split == std::string_view::npos ? bytes : bytes.substr(split + 1);

  const auto found = query_param(rest, name);
  if (rest.find('?') == std::string_view::npos) check(!found);
  if (found) check(found->size() <= rest.size());

  // The name is matched as written, so it must not contain what separates parameters.
  if (name.find_first_of("&=#?") != std::string_view::npos) return 0;
  const auto question = rest.find('?');
  const std::string_view query = question == std::string_view::npos ? rest : rest.substr(question + 1);
  const std::string target =
      "/path?" + std::string(name) + "=" + percent_encoded(rest) + "&" + std::string(query);
  check(query_param(target, name) == rest);
  return 0;
}
