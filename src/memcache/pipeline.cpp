#include "memcache/pipeline.hpp"

#include "memcache/error.hpp"

namespace sluice::memcache {

std::string_view pipeline::prepare_write() {
  write_buffer_.clear();
  for (auto it = queue_.begin() + static_cast<std::ptrdiff_t>(written_); it != queue_.end(); ++it)
    write_buffer_.append((*it)->payload);
  written_ += unwritten_;
  unwritten_ = 0;
  return write_buffer_;
}

std::size_t pipeline::on_read(std::string_view data, boost::system::error_code& ec) {
  ec = {};
  std::size_t pos = 0;
  while (pos < data.size()) {
    if (written_ == 0) {
      parse_error_ = "unexpected reply: no request is waiting for one";
      ec = error::protocol_error;
      return pos;
    }
    auto& front = *queue_.front();
    std::size_t consumed = 0;
    const auto status =
        parse_reply(data.substr(pos), front.expected[front.replies.size()], consumed, scratch_, parse_error_);
    if (status == parse_status::need_more) break;
    if (status == parse_status::protocol_error) {
      ec = error::protocol_error;
      return pos;
    }
    pos += consumed;
    if (front.replies.empty()) front.replies.reserve(front.expected.size());
    front.replies.push_back(std::move(scratch_));
    if (front.replies.size() == front.expected.size()) complete_front();
  }
  return pos;
}

}  // namespace sluice::memcache
