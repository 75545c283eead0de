#pragma once
// One gRPC call on an HTTP/2 stream: checks the request headers (method, content-type, grpc-timeout,
// grpc-encoding), collects the one request message (or, for a bidirectional stream, hands each message to the
// handler's stream_listener as it arrives), and sends what the handler answers as gRPC does: response
// headers, length-prefixed messages, then trailers with grpc-status; errors before any message as one
// Trailers-Only HEADERS frame. After the deadline, a reset or a closed connection the call is done: later
// answers are dropped. A streaming call still open when the connection goes away (GOAWAY: shutdown, max
// connection age) ends with UNAVAILABLE, so its client reconnects at once.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "net/grpc/message_reader.hpp"
#include "net/grpc/message_stream.hpp"
#include "net/grpc/method_table.hpp"
#include "net/grpc/status.hpp"
#include "net/h2/session.hpp"

namespace google::protobuf {
class MessageLite;
}

namespace sluice::net::grpc {

struct call_limits {
  std::size_t max_recv_message_bytes = 4 << 20;  // GRPC_MAX_RECV_MESSAGE_BYTES
  // A streaming call whose client lets this much of the answer pile up unread is reset (CANCEL) at its next
  // write.
  std::size_t max_unsent_bytes = 4 << 20;
};

// What the handler of a bidirectional call hears once it has started: each request message (decoded) as it
// arrives, the client's half-close, the connection going away, and the end of the call. All on the call's
// worker thread; the call drops its listener when the stream closes.
class stream_listener {
 public:
  virtual ~stream_listener() = default;
  virtual void on_message(std::string_view message) = 0;
  // The client will send nothing more; the call stays open until finished. Default: finish with OK.
  virtual void on_half_close();
  // The connection is closing (GOAWAY). Unless the listener finishes the call here, it ends with UNAVAILABLE.
  virtual void on_going_away() {}
  // The call ended without finish(): reset, deadline, the connection closed, or the client stopped reading.
  virtual void on_cancel() {}

 protected:
  friend class call;
  call* call_ = nullptr;  // set by call::listen; valid while the listener is the call's
};

class call final : public h2::stream, public std::enable_shared_from_this<call> {
 public:
  call(const method_table& methods, const call_limits& limits, boost::asio::any_io_executor ex)
      : methods_(methods),
        reader_(limits.max_recv_message_bytes),
        max_unsent_bytes_(limits.max_unsent_bytes),
        executor_(std::move(ex)) {}

  // For handlers.
  std::string_view request() const { return reader_.message(); }
  const boost::asio::any_io_executor& executor() const { return executor_; }
  // Unary: the response message and status OK.
  void reply(const google::protobuf::MessageLite& response);
  // Server streaming: one more message (the response headers go out with the first).
  void write(const google::protobuf::MessageLite& message);
  // Ends the call with this status (OK included), after whatever was written.
  void finish(status_code code, std::string_view message = {});
  // Whether the request had any header the method table asked to keep.
  bool kept_headers() const { return !kept_headers_.empty(); }
  // A request header the method table asked to keep; nothing when absent (or not kept).
  std::optional<std::string_view> header(std::string_view name) const {
    for (const auto& [n, v] : kept_headers_) {
      if (n == name) return std::string_view(v);
    }
    return std::nullopt;
  }
  // Answered, cancelled, reset, or past its deadline: nothing more will be sent.
  bool done() const { return done_; }
  // Called once when the call ends without the handler having finished it (reset, deadline, closed).
  void on_cancel(std::function<void()> f) { on_cancel_ = std::move(f); }
  // A bidirectional call's handler names who hears its messages (before returning).
  void listen(std::shared_ptr<stream_listener> listener);
  // Tells connections apart (for per-connection limits); null once the stream is closed.
  const void* connection() const { return connection_id(); }

 private:
  bool on_header(std::string_view name, std::string_view value) override;
  void on_headers_done() override;
  bool on_data(std::span<const std::uint8_t> chunk) override;
  // A bidirectional call takes each message as it completes: its bytes go back to flow control at once.
  bool keeps_body() const override { return !done_ && !rejection_ && !messages_; }
  void on_request_end() override;
  void on_closed(std::uint32_t error_code) override;
  void on_going_away() override;
  void start_stream();
  void deliver(std::string_view message);

  void start_deadline(std::chrono::nanoseconds timeout);
  struct rejection {
    const char* http_status;  // "200" for a gRPC error, else 405 or 415
    status_code code;
    std::string message;
  };
  void reject(const char* http_status, status_code code, std::string message);
  void answer_rejection(const rejection& r);
  void append_message(const google::protobuf::MessageLite& m);
  void end(status_code code, std::string_view message);
  void abort_with(status_code code, std::string_view message);
  void cancelled();
  void notify_cancel();
  void check_headers();

  const method_table& methods_;
  const method* method_ = nullptr;
  message_reader reader_;
  std::size_t max_unsent_bytes_;
  std::unique_ptr<message_stream> messages_;  // bidirectional calls only
  std::shared_ptr<stream_listener> listener_;
  boost::asio::any_io_executor executor_;
  std::optional<boost::asio::steady_timer> deadline_;
  std::function<void()> on_cancel_;
  std::vector<std::pair<std::string, std::string>> kept_headers_;
  std::string path_;              // only when it names no method: for the error message
  std::string bad_content_type_;  // only when it is not gRPC's: for the error message
  std::optional<std::chrono::nanoseconds> timeout_;
  std::optional<rejection> rejection_;  // refused before the request ended: answered when it ends
  encoding encoding_ = encoding::identity;
  bool post_ = false;
  bool grpc_content_type_ = false;
  bool bad_timeout_ = false;
  bool bad_encoding_ = false;
  bool headers_sent_ = false;
  bool done_ = false;
};

}  // namespace sluice::net::grpc
