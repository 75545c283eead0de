#include "stats/statsd_transport.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <memory>

#include "core/log.hpp"
#include "stats/line_text.hpp"

namespace sluice::stats {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// gostats' dial timeout.
constexpr std::chrono::milliseconds connect_timeout{1500};

}  // namespace

statsd_transport::statsd_transport(asio::any_io_executor executor, std::string host, std::uint16_t port,
                                   bool udp)
    : host_(std::move(host)),
      port_(port),
      udp_(udp),
      tcp_resolver_(executor),
      udp_resolver_(executor),
      tcp_(executor),
      udp_socket_(executor),
      connect_deadline_(executor) {}

void statsd_transport::send(std::string lines) {
  if (pending_.size() + lines.size() > max_pending_bytes) {
    failed("the statsd server does not keep up");
    return;
  }
  pending_ += lines;
  if (state_ == state::idle) {
    resolve();
  } else if (state_ == state::connected) {
    if (udp_) {
      send_datagrams();
    } else if (!writing_) {
      write();
    }
  }
}

void statsd_transport::resolve() {
  state_ = state::resolving;
  auto gen = generation_;
  auto service = std::to_string(port_);
  if (udp_) {
    udp_resolver_.async_resolve(host_, service, [this, gen](const error_code& ec, const auto& results) {
      if (gen != generation_) return;
      if (ec || results.empty()) {
        state_ = state::idle;
        failed(core::cat("cannot resolve ", host_, ": ", ec.message()));
        return;
      }
      // A statsd agent usually listens on IPv4 only, and a datagram to a closed port is lost without a word:
      // prefer an IPv4 address when the name has both.
      udp_target_ = results.begin()->endpoint();
      for (const auto& r : results) {
        if (r.endpoint().address().is_v4()) {
          udp_target_ = r.endpoint();
          break;
        }
      }
      error_code ignored;
      udp_socket_.close(ignored);
      udp_socket_.open(udp_target_->protocol(), ignored);
      udp_socket_.non_blocking(true, ignored);
      state_ = state::connected;
      send_datagrams();
    });
    return;
  }
  tcp_resolver_.async_resolve(host_, service, [this, gen](const error_code& ec, const auto& results) {
    if (gen != generation_) return;
    if (ec) {
      state_ = state::idle;
      failed(core::cat("cannot resolve ", host_, ": ", ec.message()));
      return;
    }
    connect(results);
  });
}

void statsd_transport::connect(const asio::ip::tcp::resolver::results_type& endpoints) {
  state_ = state::connecting;
  auto gen = generation_;
  connect_deadline_.expires_after(connect_timeout);
  connect_deadline_.async_wait([this, gen](const error_code& ec) {
    if (!ec && gen == generation_ && state_ == state::connecting) disconnect();
  });
  asio::async_connect(tcp_, endpoints, [this, gen](const error_code& ec, const asio::ip::tcp::endpoint&) {
    if (gen != generation_) {
      failed(core::cat("cannot connect to ", host_, ":", port_, ": timed out"));
      return;
    }
    connect_deadline_.cancel();
    if (ec) {
      disconnect();
      failed(core::cat("cannot connect to ", host_, ":", port_, ": ", ec.message()));
      return;
    }
    state_ = state::connected;
    watch_for_close();
    if (!pending_.empty()) write();
  });
}

void statsd_transport::write() {
  writing_ = true;
  auto data = std::make_shared<std::string>(std::move(pending_));
  pending_.clear();
  auto gen = generation_;
  asio::async_write(tcp_, asio::buffer(*data), [this, gen, data](const error_code& ec, std::size_t) {
    if (gen != generation_) return;
    writing_ = false;
    if (ec) {
      disconnect();
      failed(core::cat("lost the connection to ", host_, ":", port_, ": ", ec.message()));
      return;
    }
    succeeded();
    if (!pending_.empty()) write();
  });
}

void statsd_transport::watch_for_close() {
  auto gen = generation_;
  tcp_.async_read_some(asio::buffer(&probe_, 1), [this, gen](const error_code& ec, std::size_t) {
    if (gen != generation_) return;
    if (!ec) {
      watch_for_close();
      return;
    }
    // Not an outage yet: the next flush connects again.
    core::log_info("statsd connection to ", host_, ":", port_, " closed (", ec.message(),
                   "); reconnecting at the next flush");
    disconnect();
  });
}

void statsd_transport::send_datagrams() {
  std::string lines = std::move(pending_);
  pending_.clear();
  for (auto datagram : split_lines(lines, max_datagram_bytes)) {
    error_code ec;
    udp_socket_.send_to(asio::buffer(datagram), *udp_target_, 0, ec);
    if (ec == asio::error::would_block) return;  // the socket buffer is full: drop the rest of this flush
    if (ec) {
      // Resolve again at the next flush: the address may have changed.
      disconnect();
      failed(core::cat("cannot send to ", host_, ":", port_, ": ", ec.message()));
      return;
    }
  }
  succeeded();
}

void statsd_transport::disconnect() {
  ++generation_;
  error_code ignored;
  tcp_.close(ignored);
  connect_deadline_.cancel();
  state_ = state::idle;
  writing_ = false;
}

void statsd_transport::failed(std::string_view what) {
  pending_.clear();
  if (in_outage_) return;
  in_outage_ = true;
  core::log_warn("statsd: ", what, "; dropping stats until it works again");
}

void statsd_transport::succeeded() {
  if (!in_outage_) return;
  in_outage_ = false;
  core::log_warn("statsd: sending stats to ", host_, ":", port_, " again");
}

}  // namespace sluice::stats
