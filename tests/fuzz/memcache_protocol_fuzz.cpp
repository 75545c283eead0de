// libFuzzer: bytes from memcached. The first byte picks the command the reply answers (get, incr or add), the
// rest is the reply stream (for the pipeline: the replies to three requests, the first byte picking the kind
// the first asks for and the others in turn, a get's keys merged). Checks: no crash; a complete reply
// consumed something and no more than it had; the same bytes cut just before its end need more; a reply's
// items or number written back in memcached's own form parse to the same values; the key checker never passes
// a key the protocol could not carry; and a pipeline fed the stream whole and byte by byte completes the same
// requests with the same replies.
//
// Build and run: scripts/fuzz memcache_protocol [seconds]

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "memcache/pipeline.hpp"
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

// Three requests (the kinds in turn from `first`) on a pipeline fed `bytes` in pieces of `piece` bytes. -> a
// description of what completed, and how the stream ended.
std::string run_pipeline(std::string_view bytes, mc::reply_kind first, std::size_t piece) {
  mc::pipeline p;
  std::string log;
  for (int i = 0; i < 3; ++i) {
    auto r = std::make_shared<mc::pending_request>();
    const auto kind = static_cast<mc::reply_kind>((static_cast<int>(first) + i) % 4);
    if (kind == mc::reply_kind::values) {
      // Keys any stream may well answer; the requests' gets are merged into one.
      for (auto key : {"a", "b", "a"}) mc::add_get_key(r->get_keys, key);
    } else {
      r->payload = "x\r\n";
      r->expected = {kind};
    }
    r->done = [&log, i, kind](boost::system::error_code ec, std::vector<mc::reply>&& replies) {
      log += std::to_string(i) + (ec ? ":failed " : ":done ");
      for (const auto& reply : replies) log += written_back(reply, kind) + reply.message + "|";
    };
    p.enqueue(std::move(r));
  }
  p.prepare_write();
  std::string buffer;
  boost::system::error_code ec;
  for (std::size_t at = 0; at < bytes.size() && !ec; at += piece) {
    buffer.append(bytes.substr(at, piece));
    buffer.erase(0, p.on_read(buffer, ec));
  }
  p.on_disconnect(ec);
  return log + (ec ? "error" : "ok");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto kind = static_cast<mc::reply_kind>(data[0] % 4);
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);

  if (const bool valid = !mc::key_problem(bytes); valid) {
    check(!bytes.empty() && bytes.size() <= mc::limits::max_key_length);
    check(bytes.find_first_of(std::string_view(" \r\n\0", 4)) == std::string_view::npos);
  }

  if (bytes.size() <= 512) check(run_pipeline(bytes, kind, bytes.size() + 1) == run_pipeline(bytes, kind, 1));

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
