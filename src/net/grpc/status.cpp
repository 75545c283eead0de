#include "net/grpc/status.hpp"

namespace sluice::net::grpc {

std::string percent_encode(std::string_view message) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(message.size());
  for (unsigned char c : message) {
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace sluice::net::grpc
