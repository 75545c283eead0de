#include "redis/pipeline.hpp"

#include <algorithm>
#include <utility>

#include "redis/error.hpp"

namespace sluice::redis {

std::string_view pipeline::prepare_write(std::size_t max_requests) {
  // Called from a `done` below, it would overwrite the buffer being returned: the new requests go next time.
  if (completing_) return {};
  write_buffer_.clear();
  const std::size_t count = max_requests == 0 ? unwritten_ : std::min(max_requests, unwritten_);
  const auto first = queue_.begin() + static_cast<std::ptrdiff_t>(written_);
  const auto last = first + static_cast<std::ptrdiff_t>(count);
  std::size_t size = 0;
  for (auto it = first; it != last; ++it) size += (*it)->payload.size();
  write_buffer_.reserve(size);
  std::vector<std::shared_ptr<pending_request>> no_reply;
  for (auto it = first; it != last; ++it) {
    write_buffer_.append((*it)->payload);
    if ((*it)->expected_replies == 0) no_reply.push_back(*it);
  }
  written_ += count;
  unwritten_ -= count;
  if (!no_reply.empty()) {
    // Nothing will come back for these: they are done once written, and must not take part in reply matching.
    queue_.erase(std::remove_if(first, last, [](const auto& r) { return r->expected_replies == 0; }), last);
    written_ -= no_reply.size();
    completing_ = true;
    for (const auto& request : no_reply) finish(*request, {}, {});
    completing_ = false;
  }
  return write_buffer_;
}

std::size_t pipeline::on_read(std::string_view data, boost::system::error_code& ec) {
  ec = {};
  std::size_t pos = 0;
  while (pos < data.size()) {
    if (unasked()) {  // the stream can no longer be matched to requests
      ec = error::protocol_error;
      return pos;
    }
    // Decoded only once the scanner has seen the whole reply: not from its start again on every read.
    if (!scanner_.ready(data.substr(pos))) break;
    std::size_t consumed = 0;
    const parse_status status = parse_reply(data.substr(pos), consumed, scratch_, parse_error_);
    // Decoded, failed, or the scanner was too quick (then both look again from the start next time).
    scanner_.reset();
    if (status == parse_status::need_more) break;
    if (status == parse_status::protocol_error) {
      ec = error::protocol_error;
      return pos;
    }
    pos += consumed;
    auto& front = *queue_.front();
    if (front.replies.empty()) front.replies.reserve(front.expected_replies);  // one allocation per request
    front.replies.push_back(std::move(scratch_));
    // A request whose caller gave up (null `done`) drops its replies there.
    if (front.replies.size() == front.expected_replies) complete_front();
  }
  return pos;
}

}  // namespace sluice::redis
