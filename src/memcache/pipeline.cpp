#include "memcache/pipeline.hpp"

#include "memcache/error.hpp"

namespace sluice::memcache {

std::size_t replies_wanted(const pending_request& r) {
  return r.expected.size() + (r.get_keys.empty() ? 0 : 1);
}

namespace {

// The next key of a key list (" k1 k2"), removed from it.
std::string_view next_key(std::string_view& list) {
  list.remove_prefix(1);
  const auto end = std::min(list.find(' '), list.size());
  const auto key = list.substr(0, end);
  list.remove_prefix(end);
  return key;
}

}  // namespace

std::string_view pipeline::prepare_write() {
  write_buffer_.clear();
  const auto end = queue_.end();
  auto it = queue_.begin() + static_cast<std::ptrdiff_t>(written_);
  while (it != end) {
    // One group: the requests whose keys fit in one get line, that get, then their other commands.
    const auto first = it;
    std::size_t key_bytes = 0;
    for (; it != end; ++it) {
      const auto n = (*it)->get_keys.size();
      if (key_bytes > 0 && key_bytes + n > max_merged_get_bytes) break;
      key_bytes += n;
    }
    if (key_bytes > 0) {
      write_buffer_ += "get";
      for (auto r = first; r != it; ++r) write_buffer_ += (*r)->get_keys;
      write_buffer_ += "\r\n";
    }
    for (auto r = first; r != it; ++r) write_buffer_ += (*r)->payload;
    groups_.push_back({static_cast<std::size_t>(it - first), key_bytes > 0});
  }
  written_ += unwritten_;
  unwritten_ = 0;
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
    auto& current = groups_.front();
    auto& front = *queue_.front();
    const auto kind = current.get_pending
                          ? reply_kind::values
                          : front.expected[front.replies.size() - (front.get_keys.empty() ? 0 : 1)];
    std::size_t consumed = 0;
    const auto status = parse_reply(data.substr(pos), kind, consumed, scratch_, parse_error_);
    if (status == parse_status::need_more) break;
    if (status == parse_status::protocol_error) {
      ec = error::protocol_error;
      return pos;
    }
    pos += consumed;
    if (current.get_pending) {
      current.get_pending = false;
      if (!deal_values(current.requests, scratch_)) {
        ec = error::protocol_error;
        return pos;
      }
    } else {
      if (front.replies.empty()) front.replies.reserve(replies_wanted(front));
      front.replies.push_back(std::move(scratch_));
    }
    complete_ready();
  }
  return pos;
}

bool pipeline::deal_values(std::size_t requests, reply& merged) {
  auto next = merged.items.begin();
  for (std::size_t i = 0; i < requests; ++i) {
    auto& r = *queue_[i];
    if (r.get_keys.empty()) continue;
    reply own;
    own.result = merged.result;
    own.message = merged.message;
    for (std::string_view keys = r.get_keys; !keys.empty();) {
      const auto key = next_key(keys);
      if (next != merged.items.end() && next->key == key) own.items.push_back(std::move(*next++));
    }
    r.replies.reserve(replies_wanted(r));
    r.replies.push_back(std::move(own));
  }
  if (next == merged.items.end()) return true;
  parse_error_ =
      "memcached answered get with key '" + next->key.substr(0, 80) + "', not asked for at that place";
  return false;
}

void pipeline::complete_ready() {
  // A callback may queue, cancel or fail requests, so each round looks at the queue afresh.
  while (written_ > 0 && !groups_.front().get_pending &&
         queue_.front()->replies.size() == replies_wanted(*queue_.front())) {
    if (--groups_.front().requests == 0) groups_.pop_front();
    complete_front();
  }
}

}  // namespace sluice::memcache
