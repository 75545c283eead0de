#pragma once
// The I/O shell around h2::session: one HTTP/2 server connection on an Asio stream (TCP, unix socket, or TLS
// over TCP), confined to the thread of its worker. Reads feed the session; writes are coalesced: everything
// nghttp2 has ready goes out in one buffer, one write in flight, and answers completed later in the same loop
// pass share one flush. Plain sockets wait for readability and read into the worker's shared buffer, so an
// idle connection holds no read buffer of its own.

#include <boost/asio/post.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/connection_limit.hpp"
#include "net/h2/session.hpp"

namespace sluice::net::h2 {

// What a connection needs of the server that accepted it; shared, so it outlives every connection.
class connection_base;
class connection_owner {
 public:
  virtual ~connection_owner() = default;
  virtual std::shared_ptr<stream> open_stream(session& s, const boost::asio::any_io_executor& ex) = 0;
  virtual void add(connection_base* c) = 0;
  virtual void remove(connection_base* c) = 0;
  // One buffer per worker for the reads of plain sockets.
  virtual std::vector<std::uint8_t>& read_buffer() = 0;
};

struct connection_options {
  limits h2;
  std::chrono::milliseconds max_age{0};  // 0: none; else GOAWAY at age ±10%
  std::chrono::milliseconds max_age_grace{0};
};

class connection_base {
 public:
  virtual ~connection_base() = default;
  // GOAWAY (announced, then with the real last stream id); open streams may finish within `grace`.
  virtual void drain(std::chrono::milliseconds grace) = 0;
  virtual void close() = 0;
};

template <typename T>
struct is_ssl_stream : std::false_type {};
template <typename T>
struct is_ssl_stream<boost::asio::ssl::stream<T>> : std::true_type {};

template <typename Socket>
class connection final : public connection_base,
                         public stream_factory,
                         public std::enable_shared_from_this<connection<Socket>> {
  static constexpr bool is_tls = is_ssl_stream<Socket>::value;
  static constexpr std::size_t tls_read_bytes = 16 * 1024;
  // Between the announcing GOAWAY and the real one: time for requests already sent to arrive.
  static constexpr std::chrono::milliseconds goaway_delay{100};
  // For the TLS handshake, and then for the client's HTTP/2 preface: a client that connects and says nothing
  // (or trickles its preface) is closed instead of holding a connection forever.
  static constexpr std::chrono::seconds handshake_timeout{10};

 public:
  // `keep` lives as long as the connection (a TLS connection's context), and so does its MAX_CONNECTIONS
  // slot.
  template <typename... SocketArgs>
  connection(std::shared_ptr<connection_owner> owner, const connection_options& options,
             std::shared_ptr<const void> keep, core::connection_limit::slot slot, SocketArgs&&... args)
      : keep_(std::move(keep)),
        slot_(std::move(slot)),
        socket_(std::forward<SocketArgs>(args)...),
        owner_(std::move(owner)),
        options_(options),
        session_(*this, options.h2),
        timer_(socket_.get_executor()) {
    owner_->add(this);
  }
  ~connection() override { owner_->remove(this); }

  void start() {
    if constexpr (is_tls) {
      timer_.expires_after(handshake_timeout);
      timer_.async_wait([self = this->shared_from_this()](boost::system::error_code ec) {
        if (!ec && !self->handshake_done_) self->close();
      });
      socket_.async_handshake(boost::asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](boost::system::error_code ec) {
                                self->handshake_done_ = true;
                                self->timer_.cancel();
                                if (ec || self->closed_) return self->close();
                                self->serve();
                              });
    } else {
      serve();
    }
  }

  void drain(std::chrono::milliseconds grace) override {
    if (closed_) return;
    const auto deadline = std::chrono::steady_clock::now() + grace;
    if (draining_) {
      // Already draining (max age) with a longer grace: the earlier deadline wins.
      if (deadline < close_at_) {
        close_at_ = deadline;
        if (goaway_sent_) close_at_deadline();
      }
      return;
    }
    draining_ = true;
    close_at_ = deadline;
    if (!serving_) return close();  // still in the TLS handshake: nothing to finish
    session_.shutdown_notice();
    timer_.expires_after(std::min<std::chrono::milliseconds>(goaway_delay, grace));
    timer_.async_wait([self = this->shared_from_this()](boost::system::error_code ec) {
      if (ec || self->closed_) return;
      self->session_.goaway();
      self->goaway_sent_ = true;
      self->close_at_deadline();
    });
  }

  void close() override {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ignored;
    timer_.cancel();
    socket_.lowest_layer().close(ignored);
  }

 private:
  void close_at_deadline() {
    timer_.expires_at(close_at_);
    timer_.async_wait([self = this->shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->close();
    });
  }

  void serve() {
    serving_ = true;
    flush();  // our SETTINGS
    read();
    timer_.expires_after(handshake_timeout);
    timer_.async_wait([self = this->shared_from_this()](boost::system::error_code ec) {
      if (!ec && !self->session_.preface_received()) self->close();
    });
  }

  // Once the client's preface has arrived: the connection's age starts counting.
  void on_preface() {
    preface_seen_ = true;
    if (draining_) return;  // the drain owns the timer now
    timer_.cancel();
    if (options_.max_age.count() > 0) {
      // ±10% jitter so connections made together do not all reconnect together (as grpc-go).
      thread_local std::minstd_rand rng{std::random_device{}()};
      const auto age = options_.max_age.count();
      const auto jitter =
          static_cast<long long>(std::uniform_real_distribution<double>(-0.1, 0.1)(rng) * age);
      timer_.expires_after(std::chrono::milliseconds(age + jitter));
      timer_.async_wait([self = this->shared_from_this()](boost::system::error_code ec) {
        if (!ec) self->drain(self->options_.max_age_grace);
      });
    }
  }

  std::shared_ptr<stream> open_stream(session& s) override {
    return owner_->open_stream(s, socket_.get_executor());
  }
  void output_ready() override {
    if (flush_posted_ || closed_) return;
    flush_posted_ = true;
    boost::asio::post(socket_.get_executor(), [self = this->shared_from_this()] {
      self->flush_posted_ = false;
      self->flush();
    });
  }

  void read() {
    if constexpr (is_tls) {
      if (tls_buffer_.empty()) tls_buffer_.resize(tls_read_bytes);
      socket_.async_read_some(boost::asio::buffer(tls_buffer_),
                              [self = this->shared_from_this()](boost::system::error_code ec, std::size_t n) {
                                self->on_bytes(ec, self->tls_buffer_.data(), n);
                              });
    } else {
      socket_.async_wait(Socket::wait_read, [self = this->shared_from_this()](boost::system::error_code ec) {
        if (ec) return self->on_bytes(ec, nullptr, 0);
        auto& buffer = self->owner_->read_buffer();
        std::size_t n = self->socket_.read_some(boost::asio::buffer(buffer), ec);
        if (ec == boost::asio::error::would_block || ec == boost::asio::error::try_again) return self->read();
        self->on_bytes(ec, buffer.data(), n);
      });
    }
  }

  void on_bytes(boost::system::error_code ec, const std::uint8_t* data, std::size_t n) {
    if (closed_) return;
    if (ec) return close();  // end of stream or a broken connection: open streams are cancelled
    bool ok = session_.feed({data, n});
    if (!preface_seen_ && session_.preface_received()) on_preface();
    flush();
    if (ok && !closed_) read();
  }

  void flush() {
    if (writing_ || closed_) return;
    out_.clear();
    if (out_.capacity() > 256 * 1024) std::string().swap(out_);  // after a large answer, do not keep it
    const bool ok = session_.drain(out_);
    if (out_.empty()) {
      if (!ok || session_.finished()) close();
      return;
    }
    writing_ = true;
    boost::asio::async_write(socket_, boost::asio::buffer(out_),
                             [self = this->shared_from_this()](boost::system::error_code ec, std::size_t) {
                               self->writing_ = false;
                               if (ec) return self->close();
                               self->flush();
                             });
  }

  std::shared_ptr<const void> keep_;   // before socket_: destroyed after it
  core::connection_limit::slot slot_;  // released once the socket is closed
  Socket socket_;
  std::shared_ptr<connection_owner> owner_;
  const connection_options options_;
  session session_;
  boost::asio::steady_timer timer_;  // max age, then the drain phases
  std::string out_;
  std::vector<std::uint8_t> tls_buffer_;
  bool writing_ = false;
  bool flush_posted_ = false;
  bool draining_ = false;
  bool goaway_sent_ = false;
  std::chrono::steady_clock::time_point close_at_;
  bool serving_ = false;
  bool handshake_done_ = false;
  bool preface_seen_ = false;
  bool closed_ = false;
};

}  // namespace sluice::net::h2
