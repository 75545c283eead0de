// Writes seed inputs for h2_grpc_fuzz: what a real HTTP/2 client sends for a few gRPC calls, in the
// fuzzer's input format (0xFF, then the bytes as sent, the client's preface included).

#include <fstream>
#include <iostream>
#include <string>

#include "../support/h2_loopback.hpp"
#include "health.pb.h"

namespace {

std::string body(const std::string& service) {
  ::grpc::health::v1::HealthCheckRequest r;
  r.set_service(service);
  return sluice::test::h2_client::frame(r.SerializeAsString());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: h2_grpc_seeds DIR\n";
    return 2;
  }
  using headers = std::vector<std::pair<std::string, std::string>>;
  const headers grpc = {{":path", "/test.Echo/Echo"}, {"content-type", "application/grpc"}};
  struct seed {
    std::string name;
    std::vector<std::pair<headers, std::string>> requests;
  };
  auto with = [&](headers extra) {
    auto h = grpc;
    h.insert(h.end(), extra.begin(), extra.end());
    return h;
  };
  const std::vector<seed> seeds = {
      {"unary", {{grpc, body("x")}}},
      {"hold_with_deadline", {{with({{"grpc-timeout", "1m"}}), body("hold")}}},
      {"health_check",
       {{{{":path", "/grpc.health.v1.Health/Check"}, {"content-type", "application/grpc"}},
         body("ratelimit")}}},
      {"health_watch",
       {{{{":path", "/grpc.health.v1.Health/Watch"}, {"content-type", "application/grpc"}}, body("")}}},
      {"unknown_method", {{{{":path", "/test.Echo/Nope"}, {"content-type", "application/grpc"}}, body("x")}}},
      {"gzip_header", {{with({{"grpc-encoding", "gzip"}}), body("x")}}},
      {"three_calls", {{grpc, body("a")}, {grpc, body(std::string(3000, 'b'))}, {grpc, body("hold")}}},
  };
  for (const auto& s : seeds) {
    sluice::test::h2_client client;
    for (const auto& [h, b] : s.requests) client.request(h, b);
    // What the client writes: its preface, SETTINGS, HEADERS and DATA.
    std::string bytes(1, '\xFF');
    bytes += client.take_output();
    std::ofstream(std::string(argv[1]) + "/" + s.name, std::ios::binary) << bytes;
  }
  return 0;
}
