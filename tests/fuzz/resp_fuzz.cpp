// libFuzzer: arbitrary bytes as Redis replies. Checks what must hold for any input: parse_reply consumes a
// complete reply or nothing; the same bytes parse the same whether they come whole or a byte at a time
// (need_more until the end, then the same reply); the reply scanner never says "not ready" where
// parse_reply would decode a reply or report an error; and a pipeline fed the bytes in pieces sized by the
// input matches replies to requests without crashing, leaking or completing a request twice. Each reply is
// also read as GCRA's BITFIELD (gcra_command.hpp).
//
// Build and run: scripts/fuzz resp [seconds]

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/error.hpp>

#include "ratelimit/backends/redis/gcra_command.hpp"
#include "redis/pipeline.hpp"
#include "redis/reply_scanner.hpp"
#include "redis/resp.hpp"

namespace {

using namespace sluice::redis;

void check(bool ok) {
  if (!ok) std::abort();
}

// Any reply read as GCRA's BITFIELD (as a request and as negative hits): accepted or not, never out of
// bounds, and when accepted it is the reply of an op that admitted or not.
void read_as_gcra(const value& reply) {
  sluice::ratelimit::limiter::counter_op op;
  op.increment = 2;
  op.algorithm = sluice::ratelimit::limiter::gcra_op{50'000, 250'000};
  op.now_us = 1'795'000'000'000'000;
  for (bool refund : {false, true}) {
    op.refund = refund;
    sluice::ratelimit::limiter::op_result result;
    if (sluice::ratelimit::backends::redis::read_gcra(reply, op, result))
      check(result.value >= static_cast<std::uint64_t>(op.now_us));
  }
}

// The replies in `data`, parsed whole; then each one again, fed a byte at a time.
void parse_whole_and_by_byte(std::string_view data) {
  std::size_t pos = 0;
  for (int n = 0; n < 64 && pos < data.size(); ++n) {
    std::string error;
    std::size_t consumed = 0;
    value whole;
    const auto status = parse_reply(data.substr(pos), consumed, whole, error);
    if (status != parse_status::complete) {
      check(consumed == 0);
      return;
    }
    check(consumed > 0 && consumed <= data.size() - pos);
    read_as_gcra(whole);
    if (consumed <= 512) {  // every prefix of the reply is incomplete, and never an error
      for (std::size_t k = 0; k < consumed; ++k) {
        std::size_t c = 0;
        value partial;
        std::string e;
        check(parse_reply(data.substr(pos, k), c, partial, e) == parse_status::need_more && c == 0);
      }
    }
    pos += consumed;
  }
}

// The scanner's promise: when it says "not ready", parse_reply on the same bytes says need_more. Fed the
// input in pieces sized by the input, as the pipeline feeds it.
void scanner_never_holds_back_a_reply(std::string_view data) {
  reply_scanner scanner;
  std::size_t start = 0;  // of the reply being scanned
  std::size_t end = 0;    // of the bytes received so far
  std::size_t step = 0;
  for (;;) {
    const std::string_view received = data.substr(start, end - start);
    std::size_t consumed = 0;
    value v;
    std::string error;
    if (scanner.ready(received)) {
      const auto status = parse_reply(received, consumed, v, error);
      scanner.reset();
      if (status == parse_status::protocol_error) return;
      if (status == parse_status::complete) {
        start += consumed;
        continue;  // the next reply may already be here
      }
    } else {
      check(parse_reply(received, consumed, v, error) == parse_status::need_more);
    }
    if (end == data.size()) return;
    end = std::min(data.size(), end + 1 + static_cast<unsigned char>(data[step++ % data.size()]) % 32);
  }
}

void pipeline_in_pieces(std::string_view data) {
  if (data.empty()) return;
  pipeline p;
  int completions = 0;
  const int requests = 1 + static_cast<unsigned char>(data[0]) % 8;
  for (int i = 0; i < requests; ++i) {
    auto r = std::make_shared<pending_request>();
    r->payload = "*1\r\n$4\r\nPING\r\n";
    r->expected_replies = 1 + static_cast<unsigned char>(data[0]) / 64;
    r->done = [&completions](boost::system::error_code, std::vector<value>&&) { ++completions; };
    p.enqueue(std::move(r));
  }
  (void)p.prepare_write(0);
  std::string buffer;
  std::size_t at = 1;
  while (at < data.size()) {
    const std::size_t piece = 1 + static_cast<unsigned char>(data[at]) % 64;
    buffer.append(data.substr(at, piece));
    at += piece;
    boost::system::error_code ec;
    const std::size_t used = p.on_read(buffer, ec);
    check(used <= buffer.size());
    if (ec) break;
    buffer.erase(0, used);
  }
  p.on_disconnect(boost::asio::error::connection_reset);
  check(completions == requests);  // each request completed exactly once: by its replies or the disconnect
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  parse_whole_and_by_byte(bytes);
  scanner_never_holds_back_a_reply(bytes);
  pipeline_in_pieces(bytes);
  return 0;
}
