#pragma once
// A connection's receive buffer for replies that may span reads: bytes received but not parsed stay at the
// front; the buffer keeps its size between reads (resizing a std::string per read would zero-fill it every
// time) and grows only for a reply larger than what is left.

#include <boost/asio/buffer.hpp>
#include <cstring>
#include <string>
#include <string_view>

namespace sluice::core {

class receive_buffer {
 public:
  explicit receive_buffer(std::size_t chunk = 16 * 1024) : chunk_(chunk) {}

  // Where the next read goes (at least a quarter of a chunk).
  boost::asio::mutable_buffer space() {
    if (buffer_.size() < chunk_) buffer_.resize(chunk_);
    if (begin_ == end_) {
      begin_ = end_ = 0;
    } else if (buffer_.size() - end_ < chunk_ / 4) {
      std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
      if (buffer_.size() - end_ < chunk_ / 4) buffer_.resize(buffer_.size() * 2);
    }
    return boost::asio::buffer(buffer_.data() + end_, buffer_.size() - end_);
  }
  void commit(std::size_t received) { end_ += received; }
  // Received and not yet consumed.
  std::string_view data() const { return std::string_view(buffer_).substr(begin_, end_ - begin_); }
  void consume(std::size_t n) { begin_ += n; }
  void clear() { begin_ = end_ = 0; }

 private:
  std::size_t chunk_;
  std::string buffer_;
  std::size_t begin_ = 0, end_ = 0;
};

}  // namespace sluice::core
