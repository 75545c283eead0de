#pragma once
// For tests and the fuzzer: a gRPC server connection (net/h2 session + net/grpc calls) with no socket, and an
// in-process HTTP/2 client on nghttp2 to talk to it. pump() moves bytes both ways and runs the timers'
// io_context until nothing moves.

#include <nghttp2/nghttp2.h>

#include <boost/asio/io_context.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "net/grpc/call.hpp"
#include "net/grpc/method_table.hpp"
#include "net/h2/session.hpp"

namespace sluice::test {

class grpc_server_side final : public net::h2::stream_factory {
 public:
  grpc_server_side(boost::asio::io_context& io, const net::grpc::method_table& methods,
                   net::grpc::call_limits limits = {}, net::h2::limits h2 = {})
      : io_(io), methods_(methods), limits_(limits), session_(*this, h2) {}

  std::shared_ptr<net::h2::stream> open_stream(net::h2::session&) override {
    return std::make_shared<net::grpc::call>(methods_, limits_, io_.get_executor());
  }
  void output_ready() override {}
  net::h2::session& session() { return session_; }

 private:
  boost::asio::io_context& io_;
  const net::grpc::method_table& methods_;
  net::grpc::call_limits limits_;
  net::h2::session session_;
};

// gzip (RFC 1952) of `in`, as a client compresses a message.
std::string gzip(const std::string& in);

// What the client saw on one stream.
struct response {
  std::map<std::string, std::string> headers;   // the first HEADERS block
  std::map<std::string, std::string> trailers;  // a second one, if any
  std::string body;
  bool closed = false;
  std::uint32_t error_code = 0;
  int header_blocks = 0;
};

class h2_client {
 public:
  h2_client();
  ~h2_client();

  // Starts a POST with these headers (":path" and "content-type" among them) and body; returns the stream id.
  std::int32_t request(const std::vector<std::pair<std::string, std::string>>& headers, std::string body,
                       const std::string& method = "POST");
  // A request whose body is sent later, piece by piece (a client-streaming call); returns the stream id.
  std::int32_t open(const std::vector<std::pair<std::string, std::string>>& headers);
  // More of that request's body; with `end`, END_STREAM after it (half-close).
  void send(std::int32_t id, const std::string& data, bool end = false);
  void reset(std::int32_t id);
  // Everything the client has queued to send.
  std::string take_output();
  // Bytes from a server (over a real socket: scripts/bench rlqs). False on a protocol error.
  bool receive(std::string_view bytes);
  // Forgets what a stream received so far (a long run would keep every answer).
  void clear_body(std::int32_t id) { responses_[id].body.clear(); }
  // Moves bytes between the client and `server` and runs `io` until quiet.
  void pump(net::h2::session& server, boost::asio::io_context& io);
  response& at(std::int32_t id) { return responses_[id]; }

  // A gRPC message: the 5-byte prefix and `payload`.
  static std::string frame(const std::string& payload, bool compressed = false);

 private:
  struct body_source {
    std::string data;
    std::size_t offset = 0;
    bool ended = true;  // false while a streaming request may send more
  };
  std::int32_t submit(const std::vector<std::pair<std::string, std::string>>& headers,
                      std::unique_ptr<body_source> source, const std::string& method);
  static ssize_t read_body(nghttp2_session*, std::int32_t, std::uint8_t*, std::size_t, std::uint32_t*,
                           nghttp2_data_source*, void*);
  static int on_header(nghttp2_session*, const nghttp2_frame*, const std::uint8_t*, std::size_t,
                       const std::uint8_t*, std::size_t, std::uint8_t, void*);
  static int on_begin_headers(nghttp2_session*, const nghttp2_frame*, void*);
  static int on_data(nghttp2_session*, std::uint8_t, std::int32_t, const std::uint8_t*, std::size_t, void*);
  static int on_close(nghttp2_session*, std::int32_t, std::uint32_t, void*);

  nghttp2_session* ng_ = nullptr;
  std::map<std::int32_t, response> responses_;
  std::map<std::int32_t, std::unique_ptr<body_source>> bodies_;
};

}  // namespace sluice::test
