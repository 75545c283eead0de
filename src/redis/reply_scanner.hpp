#pragma once
// Where the reply at the front of a growing buffer ends, found without decoding it and without looking at a
// byte twice. The pipeline asks it before parse_reply, so a large reply that arrives over many reads is
// decoded once, when it is complete, instead of from its first byte on every read (100,000 elements in
// small reads: O(n) instead of O(n^2)). It only gates parse_reply: whenever the bytes are not RESP as it
// knows it, or past the decoder's limits, it says "ready" and leaves the verdict (and the error message) to
// parse_reply. Invariant (fuzzed): when it says "not ready", parse_reply would say need_more.

#include <cstdint>
#include <string_view>
#include <vector>

namespace sluice::redis {

class reply_scanner {
 public:
  // `data` starts at the reply's first byte: the same start on every call, with more bytes each time.
  // True when parse_reply should run on it now.
  bool ready(std::string_view data);
  // The reply was consumed (or the stream dropped): the next call scans a new reply from its start.
  void reset() {
    pos_ = 0;
    searched_ = 0;
    remaining_.clear();
  }

 private:
  enum class step { element_done, aggregate_opened, need_more, ask_parser };
  step scan_one(std::string_view data);

  std::size_t pos_ = 0;                   // bytes of the reply scanned, whole elements or headers only
  std::size_t searched_ = 0;              // how far the unfinished line at pos_ was searched for its CR
  std::vector<std::uint64_t> remaining_;  // elements still due in each open aggregate, innermost last
};

}  // namespace sluice::redis
