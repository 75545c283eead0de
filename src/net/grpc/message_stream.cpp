#include "net/grpc/message_stream.hpp"

namespace sluice::net::grpc {

std::optional<call_error> message_stream::feed(std::span<const std::uint8_t> chunk,
                                               const std::function<void(std::string_view)>& deliver) {
  std::string_view in(reinterpret_cast<const char*>(chunk.data()), chunk.size());
  while (!in.empty()) {
    if (partial_.empty() && in.size() >= message_prefix_bytes) {
      // The common case: whole messages inside one chunk are delivered from it, without a copy.
      const std::size_t length = declared_length(in.data());
      if (length > max_bytes_) {
        return message_too_large(length, max_bytes_);
      }
      if (in.size() >= message_prefix_bytes + length) {
        if (auto e = take(in.substr(0, message_prefix_bytes + length), deliver)) return e;
        in.remove_prefix(message_prefix_bytes + length);
        continue;
      }
    }
    // A message split across chunks: gather it.
    const bool had_prefix = partial_.size() >= message_prefix_bytes;
    std::size_t want = message_prefix_bytes - std::min(partial_.size(), message_prefix_bytes);
    if (had_prefix) want = message_prefix_bytes + declared_length(partial_.data()) - partial_.size();
    const std::size_t n = std::min(want, in.size());
    partial_.append(in.substr(0, n));
    in.remove_prefix(n);
    if (partial_.size() < message_prefix_bytes) continue;
    const std::size_t length = declared_length(partial_.data());
    if (!had_prefix && length > max_bytes_) {
      return message_too_large(length, max_bytes_);
    }
    if (partial_.size() == message_prefix_bytes + length) {
      auto e = take(partial_, deliver);
      std::string().swap(partial_);  // a stream that lives for hours keeps no message-sized buffer
      if (e) return e;
    }
  }
  return std::nullopt;
}

std::optional<call_error> message_stream::take(std::string_view framed,
                                               const std::function<void(std::string_view)>& deliver) {
  std::string_view message;
  if (auto e = unframe(framed, encoding_, max_bytes_, inflated_, message)) return e;
  deliver(message);
  return std::nullopt;
}

std::optional<call_error> message_stream::finish() const {
  if (partial_.empty()) return std::nullopt;
  return call_error{status_code::internal, "grpc: the stream ended inside a message"};
}

}  // namespace sluice::net::grpc
