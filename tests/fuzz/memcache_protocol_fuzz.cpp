// libFuzzer: bytes from memcached. The first byte picks the command the reply answers (get, incr or add), the
// rest is the reply stream. Checks: no crash; a complete reply consumed something and no more than it had;
// the same bytes cut just before its end need more; a reply's items or number written back in memcached's own
// form parse to the same values; and the key checker never passes a key the protocol could not carry.
//
// Build and run: scripts/fuzz memcache_protocol [seconds]

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "memcache/protocol.hpp"

namespace {

namespace mc = sluice::memcache;

void check(bool ok) {
  if (!ok) std::abort();
}

std::string written_back(const mc::reply& r, mc::reply_kind kind) {
  std::string out;
  if (kind == mc::reply_kind::values) {
    for (const auto& item : r.items) {
      out += "VALUE " + item.key + " " + std::to_string(item.flags) + " " + std::to_string(item.data.size()) +
             "\r\n" + item.data + "\r\n";
    }
    return out + "END\r\n";
  }
  return std::to_string(r.number) + "\r\n";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto kind = static_cast<mc::reply_kind>(data[0] % 3);
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);

  if (const bool valid = !mc::key_problem(bytes); valid) {
    check(!bytes.empty() && bytes.size() <= mc::limits::max_key_length);
    check(bytes.find_first_of(std::string_view(" \r\n\0", 4)) == std::string_view::npos);
  }

  std::size_t consumed = 0;
  mc::reply reply;
  std::string error;
  const auto status = mc::parse_reply(bytes, kind, consumed, reply, error);
  if (status == mc::parse_status::protocol_error) check(!error.empty());
  if (status != mc::parse_status::complete) return 0;
  check(consumed > 0 && consumed <= bytes.size());

  std::size_t again = 0;
  mc::reply cut;
  check(mc::parse_reply(bytes.substr(0, consumed - 1), kind, again, cut, error) ==
        mc::parse_status::need_more);

  const bool has_values = reply.result == mc::reply::status::values && kind == mc::reply_kind::values;
  const bool has_number = reply.result == mc::reply::status::number;
  if (!has_values && !has_number) return 0;
  const std::string text = written_back(reply, kind);
  mc::reply reread;
  check(mc::parse_reply(text, kind, again, reread, error) == mc::parse_status::complete);
  check(again == text.size());
  check(reread.number == reply.number && reread.items.size() == reply.items.size());
  for (std::size_t i = 0; i < reply.items.size(); ++i) {
    check(reread.items[i].key == reply.items[i].key && reread.items[i].flags == reply.items[i].flags &&
          reread.items[i].data == reply.items[i].data);
  }
  return 0;
}
