// scripts/bench rlqs: quota streams against a running Sluice over TCP. C connections × S streams, each with B
// buckets (shared by every stream: tenant=t0..t<B-1>, or distinct per stream with --distinct), a full usage
// report per stream every interval (one message, B bucket usages, as Envoy's 5 s report), for a number of
// seconds after a warm-up. With --pid, the server's CPU time (utime + stime) and resident memory are read
// from /proc around the measured run. Prints one `key: value` line per figure.
//
// build/rlqs_load --port P [--connections 10] [--streams 100] [--buckets 100] [--interval-ms 1000]
//                 [--seconds 20] [--warmup 5] [--pid PID] [--distinct] [--idle]
// --idle: every stream reports once (its buckets' first report) and then nothing: what idle streams cost.
// --hold N: keep the streams open N seconds after the run (so a heap profile can end while they live).

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../../tests/support/h2_loopback.hpp"
#include "rlqs.pb.h"

namespace {

using sluice::test::h2_client;
namespace pb = envoy::service::rate_limit_quota::v3;

struct options {
  int port = 8081;
  int connections = 10;
  int streams = 100;
  int buckets = 100;
  int interval_ms = 1000;
  int seconds = 20;
  int warmup = 5;
  long pid = 0;
  bool distinct = false;
  bool idle = false;
  int hold = 0;  // seconds to keep the streams open after the run (a heap profile's end)
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::stol(argv[++i]) : 0L; };
    if (a == "--port")
      o.port = static_cast<int>(next());
    else if (a == "--connections")
      o.connections = static_cast<int>(next());
    else if (a == "--streams")
      o.streams = static_cast<int>(next());
    else if (a == "--buckets")
      o.buckets = static_cast<int>(next());
    else if (a == "--interval-ms")
      o.interval_ms = static_cast<int>(next());
    else if (a == "--seconds")
      o.seconds = static_cast<int>(next());
    else if (a == "--warmup")
      o.warmup = static_cast<int>(next());
    else if (a == "--pid")
      o.pid = next();
    else if (a == "--distinct")
      o.distinct = true;
    else if (a == "--idle")
      o.idle = true;
    else if (a == "--hold")
      o.hold = static_cast<int>(next());
    else {
      std::cerr << "unknown argument " << a << "\n";
      std::exit(2);
    }
  }
  return o;
}

// utime + stime of a process, in seconds.
double cpu_seconds(long pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

long rss_kb(long pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

std::string report_for(const options& o, int stream_index) {
  pb::RateLimitQuotaUsageReports r;
  r.set_domain("quota");
  for (int b = 0; b < o.buckets; ++b) {
    auto* u = r.add_bucket_quota_usages();
    const std::string value =
        o.distinct ? "s" + std::to_string(stream_index) + "-t" + std::to_string(b) : "t" + std::to_string(b);
    (*u->mutable_bucket_id()->mutable_bucket())["tenant"] = value;
    u->set_num_requests_allowed(40);
    u->set_num_requests_denied(10);
    u->mutable_time_elapsed()->set_seconds(o.interval_ms / 1000);
  }
  return h2_client::frame(r.SerializeAsString());
}

struct connection {
  int fd = -1;
  h2_client client;
  std::vector<std::int32_t> streams;
  std::vector<int> report_index;  // which report each stream sends
  std::string out;
  std::uint64_t received = 0;
};

int dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::perror("connect");
    std::exit(1);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(fd, F_SETFL, O_NONBLOCK);
  return fd;
}

// Writes what the clients have queued and reads what came, for up to `ms`.
void pump(std::vector<std::unique_ptr<connection>>& conns, int ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  char buf[65536];
  do {
    std::vector<pollfd> fds;
    for (auto& c : conns) {
      c->out += c->client.take_output();
      fds.push_back({c->fd, static_cast<short>(POLLIN | (c->out.empty() ? 0 : POLLOUT)), 0});
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    poll(fds.data(), fds.size(), static_cast<int>(std::max<long>(0, std::min<long>(left, 10))));
    for (std::size_t i = 0; i < conns.size(); ++i) {
      auto& c = *conns[i];
      if ((fds[i].revents & POLLOUT) != 0) {
        const auto n = write(c.fd, c.out.data(), c.out.size());
        if (n > 0) c.out.erase(0, static_cast<std::size_t>(n));
      }
      if ((fds[i].revents & POLLIN) != 0) {
        const auto n = read(c.fd, buf, sizeof buf);
        if (n > 0) {
          c.received += static_cast<std::uint64_t>(n);
          c.client.receive({buf, static_cast<std::size_t>(n)});
        }
      }
    }
  } while (std::chrono::steady_clock::now() < end);
}

}  // namespace

int main(int argc, char** argv) {
  const auto o = parse(argc, argv);
  std::vector<std::string> reports;
  const int distinct_reports = o.distinct ? o.connections * o.streams : 1;
  for (int i = 0; i < distinct_reports; ++i) reports.push_back(report_for(o, i));
  const long rss_before = o.pid != 0 ? rss_kb(o.pid) : 0;

  std::vector<std::unique_ptr<connection>> conns;
  int index = 0;
  for (int c = 0; c < o.connections; ++c) {
    auto conn = std::make_unique<connection>();
    conn->fd = dial(o.port);
    for (int s = 0; s < o.streams; ++s) {
      conn->streams.push_back(conn->client.open(
          {{":path", "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas"},
           {"content-type", "application/grpc"}}));
      conn->report_index.push_back(o.distinct ? index : 0);
      ++index;
    }
    conns.push_back(std::move(conn));
  }
  auto send_round = [&] {
    for (auto& c : conns) {
      for (std::size_t s = 0; s < c->streams.size(); ++s)
        c->client.send(c->streams[s], reports[c->report_index[s]]);
    }
  };
  // The first report of every bucket on every stream, answered at once.
  send_round();
  pump(conns, 2000);
  const long rss_setup = o.pid != 0 ? rss_kb(o.pid) : 0;
  std::cout << "streams: " << o.connections * o.streams << "\nbuckets_per_stream: " << o.buckets
            << "\nrss_before_kb: " << rss_before << "\nrss_after_first_reports_kb: " << rss_setup << "\n";
  if (o.idle) {
    pump(conns, o.seconds * 1000);
    std::cout << "rss_after_idle_kb: " << (o.pid != 0 ? rss_kb(o.pid) : 0) << "\n";
    return 0;
  }
  for (int w = 0; w < o.warmup * 1000 / o.interval_ms; ++w) {
    send_round();
    pump(conns, o.interval_ms);
  }
  const double cpu0 = o.pid != 0 ? cpu_seconds(o.pid) : 0;
  std::uint64_t received0 = 0;
  for (auto& c : conns) received0 += c->received;
  const auto t0 = std::chrono::steady_clock::now();
  const int rounds = o.seconds * 1000 / o.interval_ms;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    send_round();
    const auto spent = std::chrono::steady_clock::now() - start;
    pump(conns, std::max(1, o.interval_ms -
                                static_cast<int>(
                                    std::chrono::duration_cast<std::chrono::milliseconds>(spent).count())));
    for (auto& c : conns) {
      for (auto id : c->streams) c->client.clear_body(id);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = o.pid != 0 ? cpu_seconds(o.pid) - cpu0 : 0;
  std::uint64_t received = 0;
  bool closed = false;
  for (auto& c : conns) {
    received += c->received;
    for (auto id : c->streams) closed = closed || c->client.at(id).closed;
  }
  const double usages = static_cast<double>(rounds) * o.connections * o.streams * o.buckets;
  std::cout << "rounds: " << rounds << "\nseconds: " << seconds << "\nbucket_reports: " << usages
            << "\nbucket_reports_per_second: " << usages / seconds << "\nserver_cpu_seconds: " << cpu
            << "\nserver_cpu_us_per_bucket_report: " << cpu * 1e6 / usages
            << "\nserver_cpu_share: " << cpu / seconds
            << "\nbytes_received_per_second: " << static_cast<double>(received - received0) / seconds
            << "\nrss_end_kb: " << (o.pid != 0 ? rss_kb(o.pid) : 0)
            << "\nstreams_closed_by_server: " << (closed ? "yes" : "no") << std::endl;
  if (o.hold > 0) pump(conns, o.hold * 1000);
  return closed ? 1 : 0;
}
