#include "net/grpc/message_reader.hpp"

#include <zlib.h>

#include "core/strings.hpp"

namespace sluice::net::grpc {

call_error message_too_large(std::size_t length, std::size_t max) {
  // grpc-go's wording, so clients and their logs read the same.
  return {status_code::resource_exhausted,
          core::cat("grpc: received message larger than max (", length, " vs. ", max, ")")};
}

std::optional<call_error> message_reader::feed(std::span<const std::uint8_t> chunk) {
  const bool had_prefix = body_.size() >= message_prefix_bytes;
  const auto* bytes = reinterpret_cast<const char*>(chunk.data());
  body_.insert(body_.end(), bytes, bytes + chunk.size());
  if (body_.size() < message_prefix_bytes) return std::nullopt;
  const std::size_t length = declared_length(body_.data());
  if (!had_prefix && length > max_bytes_) return message_too_large(length, max_bytes_);
  if (body_.size() > message_prefix_bytes + length) {
    return call_error{status_code::internal, "grpc: a unary request carries exactly one message"};
  }
  return std::nullopt;
}

std::optional<call_error> message_reader::finish(encoding enc) {
  if (body_.size() < message_prefix_bytes ||
      body_.size() < message_prefix_bytes + declared_length(body_.data())) {
    return call_error{status_code::internal, body_.empty() ? "grpc: the request has no message"
                                                           : "grpc: the request message is incomplete"};
  }
  return unframe(std::string_view(body_.data(), body_.size()), enc, max_bytes_, inflated_, message_);
}

std::optional<call_error> unframe(std::string_view framed, encoding enc, std::size_t max_bytes,
                                  std::string& inflated, std::string_view& message) {
  const auto flag = static_cast<unsigned char>(framed[0]);
  const auto payload = framed.substr(message_prefix_bytes);
  if (flag == 0) {
    message = payload;
    return std::nullopt;
  }
  if (flag != 1) return call_error{status_code::internal, "grpc: invalid message flags"};
  if (enc != encoding::gzip) {
    return call_error{status_code::internal,
                      "grpc: compressed flag set with identity or empty encoding (grpc-encoding)"};
  }
  if (auto e = gunzip(payload, max_bytes, inflated)) return e;
  message = inflated;
  return std::nullopt;
}

std::optional<call_error> gunzip(std::string_view in, std::size_t max_bytes, std::string& out) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return call_error{status_code::internal, "grpc: zlib failed"};
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  out.clear();
  int rv = Z_OK;
  while (rv == Z_OK) {
    if (out.size() > max_bytes) break;
    const std::size_t at = out.size();
    const std::size_t step = std::min<std::size_t>(std::max<std::size_t>(in.size() * 4, 4096), 1 << 20);
    out.resize(at + step);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + at);
    z.avail_out = static_cast<uInt>(step);
    rv = inflate(&z, Z_NO_FLUSH);
    out.resize(at + step - z.avail_out);
    if (rv == Z_BUF_ERROR && z.avail_in == 0) break;  // truncated input
  }
  inflateEnd(&z);
  if (out.size() > max_bytes) return message_too_large(out.size(), max_bytes);
  if (rv != Z_STREAM_END) return call_error{status_code::internal, "grpc: failed to decompress the message"};
  return std::nullopt;
}

}  // namespace sluice::net::grpc
