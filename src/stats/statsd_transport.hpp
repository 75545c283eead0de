#pragma once
// Carries statsd lines to STATSD_HOST:STATSD_PORT.
//   TCP (gostats' default): one connection, opened at the first send and again at the next flush after it
//   drops; a read that never expects data notices at once when the server closes it. While the server cannot
//   be reached the lines are dropped and the outage is logged once, with one more line when it is over.
//   UDP: lines packed into datagrams of at most 1432 bytes (no fragmentation on a 1500-byte MTU), as gostats
//   and datadog-go do; a full socket buffer drops the rest of the flush rather than wait.
// Every call, and every completion, runs on the executor's one thread (the flusher's).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::stats {

class statsd_transport {
 public:
  static constexpr std::size_t max_datagram_bytes = 1432;
  // Lines waiting for a slow TCP server beyond this are dropped (gostats keeps about as much).
  static constexpr std::size_t max_pending_bytes = 4 << 20;

  statsd_transport(boost::asio::any_io_executor executor, std::string host, std::uint16_t port, bool udp);

  // Whole '\n'-terminated lines.
  void send(std::string lines);

 private:
  void resolve();
  void connect(const boost::asio::ip::tcp::resolver::results_type& endpoints);
  void write();
  void watch_for_close();
  void send_datagrams();
  void disconnect();
  void failed(std::string_view what);
  void succeeded();

  std::string host_;
  std::uint16_t port_;
  bool udp_;
  boost::asio::ip::tcp::resolver tcp_resolver_;
  boost::asio::ip::udp::resolver udp_resolver_;
  boost::asio::ip::tcp::socket tcp_;
  boost::asio::ip::udp::socket udp_socket_;
  std::optional<boost::asio::ip::udp::endpoint> udp_target_;
  boost::asio::steady_timer connect_deadline_;

  enum class state { idle, resolving, connecting, connected };
  state state_ = state::idle;
  bool writing_ = false;
  // Bumped whenever the connection is dropped, so completions of an older connection are ignored.
  std::uint64_t generation_ = 0;
  std::string pending_;
  bool in_outage_ = false;
  char probe_ = 0;
};

}  // namespace sluice::stats
