// libFuzzer: the flags of `sluice client`, the input split at NUL bytes into arguments. Checks: no crash and
// no exception; an error is never empty; every -descriptors flag gives at least one pair; and the descriptors
// written back as -descriptors flags parse to the same pairs.
//
// Build and run: scripts/fuzz client_flags [seconds]

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ratelimit/client/client_flags.hpp"

namespace {

namespace client = sluice::ratelimit::client;

void check(bool ok) {
  if (!ok) std::abort();
}

void round_trip(const client::client_options& options) {
  std::vector<std::string> written;
  for (const auto& pairs : options.descriptors) {
    std::string text;
    for (const auto& [key, value] : pairs) text += (text.empty() ? "" : ",") + key + "=" + value;
    written.push_back("-descriptors=" + text);
  }
  const std::vector<std::string_view> args(written.begin(), written.end());
  const auto again = client::parse_client_flags(args);
  check(std::holds_alternative<client::client_options>(again));
  check(std::get<client::client_options>(again).descriptors == options.descriptors);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> args;
  while (!bytes.empty()) {
    const auto nul = bytes.find('\0');
    args.push_back(bytes.substr(0, nul));
    if (nul == std::string_view::npos) break;
    bytes.remove_prefix(nul + 1);
  }
  const auto parsed = client::parse_client_flags(args);
  if (const auto* error = std::get_if<std::string>(&parsed)) {
    check(!error->empty());
    return 0;
  }
  if (const auto* options = std::get_if<client::client_options>(&parsed)) {
    for (const auto& pairs : options->descriptors) check(!pairs.empty());
    round_trip(*options);
  }
  return 0;
}
