// libFuzzer: arbitrary bytes from a client into one HTTP/2 + gRPC server connection, with no socket. Two
// input forms: a first byte 0xFF means "the rest is what a client sent, preface included" (the seeds, written
// by h2_grpc_seeds from a real nghttp2 client), fed in 1 KiB pieces; anything else gets the connection
// preface put in front, so random bytes reach the frame parser, and is fed in pieces whose sizes come from
// the input. Between pieces the connection's output is drained and its timers run, as the real transport
// does.
//
// Build and run: scripts/fuzz h2_grpc [seconds]

#include <google/protobuf/stubs/logging.h>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "../support/h2_loopback.hpp"
#include "health.pb.h"
#include "net/grpc/call.hpp"
#include "net/grpc/health_service.hpp"

namespace {

using namespace sluice;

struct world {
  boost::asio::io_context io;
  net::grpc::method_table methods;
  net::grpc::health_service health{"ratelimit", [] { return true; }};
  std::shared_ptr<net::grpc::call> held;  // a call answered only by the next input: late answers

  world() {
    health.add_to(methods);
    methods.add("/test.Echo/Echo", [this](const std::shared_ptr<net::grpc::call>& c) {
      ::grpc::health::v1::HealthCheckRequest req;
      if (!req.ParseFromArray(c->request().data(), static_cast<int>(c->request().size())))
        return c->finish(net::grpc::status_code::internal, "bad request");
      if (req.service() == "hold") {
        held = c;
        return;
      }
      ::grpc::health::v1::HealthCheckResponse resp;
      resp.set_status(::grpc::health::v1::HealthCheckResponse::SERVING);
      c->reply(resp);
    });
  }
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);  // requests with invalid UTF-8 would log at every input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static world w;
  if (w.held) {
    w.held->reply(::grpc::health::v1::HealthCheckResponse());  // its connection is gone: dropped
    w.held.reset();
  }
  net::h2::limits limits;
  limits.max_concurrent_streams = 64;
  test::grpc_server_side server(w.io, w.methods, net::grpc::call_limits{.max_recv_message_bytes = 64 * 1024},
                                limits);
  auto& session = server.session();
  std::string out;
  static const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  const bool recorded = size > 0 && data[0] == 0xFF;
  if (recorded) {
    ++data;
    --size;
  } else {
    session.feed({reinterpret_cast<const std::uint8_t*>(preface.data()), preface.size()});
  }
  while (size > 0) {
    // Piece sizes: 1 KiB for recorded input, else 1..4096 from the next two bytes of the input.
    std::size_t piece = std::min<std::size_t>(size, 1024);
    if (!recorded && size > 2) {
      piece = 1 + ((static_cast<std::size_t>(data[0]) << 8 | data[1]) % 4096);
      data += 2;
      size -= 2;
      piece = std::min(piece, size);
    }
    const bool ok = session.feed({data, piece});
    data += piece;
    size -= piece;
    out.clear();
    session.drain(out);
    w.io.poll();
    if (!ok) break;
  }
  return 0;
}
