#pragma once
// What a gRPC server serves: handlers by full method path ("/package.Service/Method", case-sensitive) and
// their kind. A unary or server-streaming handler gets the call once its one request message has arrived
// whole, and answers it now or later (on the same worker thread). A bidirectional-streaming handler gets the
// call as soon as its headers are checked, and gives it a stream_listener (call.hpp) for the messages.

#include <bitset>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::net::grpc {

class call;
using handler = std::function<void(const std::shared_ptr<call>&)>;

enum class method_kind : std::uint8_t {
  unary,
  server_streaming,  // one request, many responses: ends with the call's finish() (or at GOAWAY)
  bidi_streaming,    // many requests (client streaming included), many responses
};

struct method {
  handler h;
  method_kind kind = method_kind::unary;
};

class method_table {
 public:
  void add(std::string path, handler h, method_kind kind = method_kind::unary) {
    for (auto& [p, existing] : methods_) {
      if (p == path) {
        existing = {std::move(h), kind};
        return;
      }
    }
    methods_.emplace_back(std::move(path), method{std::move(h), kind});
  }
  // A handful of methods: comparing them beats hashing a 60-byte path on every call.
  const method* find(std::string_view path) const {
    for (const auto& [p, m] : methods_) {
      if (p == path) return &m;
    }
    return nullptr;
  }
  // Whether any method of "package.Service" is served (to tell an unknown service from an unknown method).
  bool has_service(std::string_view service) const {
    for (const auto& [path, h] : methods_) {
      if (path.size() > service.size() + 2 && std::string_view(path).substr(1, service.size()) == service &&
          path[service.size() + 1] == '/')
        return true;
    }
    return false;
  }

  // Every method path, in the order added (reflection lists the services from them).
  std::vector<std::string> paths() const {
    std::vector<std::string> out;
    for (const auto& [p, m] : methods_) out.push_back(p);
    return out;
  }

  // Request headers a handler reads (by lower-case name; e.g. the trace context), kept by each call. None by
  // default: a call then keeps nothing.
  void keep_header(std::string name) {
    if (name.empty()) return;
    if (name.size() < 64) kept_lengths_ |= std::uint64_t{1} << name.size();
    kept_first_.set(static_cast<unsigned char>(name[0]));
    kept_headers_.push_back(std::move(name));
  }
  bool keeps_headers() const { return !kept_headers_.empty(); }
  bool keeps_header(std::string_view name) const {
    // By length and first letter first: on every header of every call, most names are ruled out by two bit
    // tests.
    if (name.empty() || (name.size() < 64 && ((kept_lengths_ >> name.size()) & 1) == 0) ||
        !kept_first_.test(static_cast<unsigned char>(name[0])))
      return false;
    for (const auto& h : kept_headers_) {
      if (h == name) return true;
    }
    return false;
  }

 private:
  std::vector<std::pair<std::string, method>> methods_;
  std::vector<std::string> kept_headers_;
  std::uint64_t kept_lengths_ = 0;  // bit n: a kept name has n characters
  std::bitset<256> kept_first_;     // bit c: a kept name starts with c
};

}  // namespace sluice::net::grpc
