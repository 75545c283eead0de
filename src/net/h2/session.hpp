#pragma once
// The server side of one HTTP/2 connection on libnghttp2, without a socket (sans-io): bytes read from the
// peer go in through feed(), bytes to write come out of drain(). Request streams are objects the owner
// creates (stream_factory); they hear their headers, data and end, and answer through respond / reserve /
// finish. Used by the transport in net/h2/connection.hpp and, with no socket at all, by the fuzzer.
//
// Nothing here is thread-safe: a session and its streams live on one thread (their worker).

#include <nghttp2/nghttp2.h>

#include <array>
#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "net/h2/session_memory.hpp"

namespace sluice::net::h2 {

struct limits {
  std::uint32_t max_concurrent_streams = 1024;  // SETTINGS_MAX_CONCURRENT_STREAMS (nghttp2's default: none)
  std::uint32_t initial_window_size = 1 << 20;  // per stream, so a large request needs no WINDOW_UPDATE wait
  // The connection's receive window, which bounds the request bytes held for calls not yet complete: a
  // stream's bytes are given back to the connection window only when its request ends (or the stream closes).
  // Must be larger than the largest request accepted.
  std::uint32_t connection_window = 16 << 20;
  std::size_t max_header_list_bytes = 16 * 1024;
  // Rapid Reset (CVE-2023-44487): RST_STREAMs from the peer, a token bucket; past it, GOAWAY.
  std::uint64_t reset_burst = 1000;
  std::uint64_t reset_rate_per_second = 33;
  std::size_t max_continuations = 8;  // CONTINUATION flood (CVE-2024-28182)
};

// A response header or trailer. The name must be a lowercase string that outlives the session (a literal):
// nghttp2 sends it as is, without a copy; the value is copied.
struct header {
  std::string_view name;
  std::string_view value;
};

class session;

// One request stream. Owned by the session while open (and by whoever else holds it, e.g. pending work).
class stream {
 public:
  virtual ~stream() = default;

  // One request header (pseudo-headers included, already validated by nghttp2). False resets the stream.
  virtual bool on_header(std::string_view name, std::string_view value) = 0;
  // The request header block is complete.
  virtual void on_headers_done() {}
  // A chunk of the request body. False resets the stream.
  virtual bool on_data(std::span<const std::uint8_t> chunk) = 0;
  // Whether the stream still keeps what its body sends (a stream that drops it gives it back to flow control
  // at once).
  virtual bool keeps_body() const { return true; }
  // The peer ended its side (END_STREAM).
  virtual void on_request_end() = 0;
  // The stream is gone (answered, reset by either side, or the connection closed): send nothing more.
  virtual void on_closed(std::uint32_t error_code) { (void)error_code; }
  // The connection is going away (the final GOAWAY was queued): a long-lived stream should end now.
  virtual void on_going_away() {}

  std::int32_t id() const { return id_; }
  bool open() const { return session_ != nullptr; }
  // Tells connections apart while the stream is open (null once closed); never dereferenced by callers.
  const void* connection_id() const { return session_; }

 protected:
  // Answering (all no-ops once the stream is closed). `respond` sends the response headers; with
  // `end_stream` they are the whole answer, else a body follows through reserve() and ends with finish().
  void respond(std::span<const header> headers, bool end_stream);
  // Appends n bytes to the response body and returns them, to be filled in place.
  char* reserve(std::size_t n);
  // At most two trailers.
  void finish(std::span<const header> trailers);
  // Response bytes queued and not yet taken by nghttp2 (the peer may not be reading).
  std::size_t unsent_bytes() const { return out_.size() - out_taken_; }
  // RST_STREAM with this HTTP/2 error code: the stream ends at once, with nothing more sent.
  void reset(std::uint32_t error_code);

 private:
  friend class session;
  session* session_ = nullptr;
  std::int32_t id_ = 0;
  // While open, the session's hold on the stream and its place in the session's list of open streams.
  std::shared_ptr<stream> self_;
  stream* prev_ = nullptr;
  stream* next_ = nullptr;
  // Response body not yet taken by nghttp2; a unary answer fits inline.
  boost::container::small_vector<char, 128> out_;
  std::size_t out_taken_ = 0;
  // At most two trailers (grpc-status, grpc-message): inline, no allocation per response.
  static constexpr std::size_t max_trailers = 2;
  std::array<std::pair<std::string, std::string>, max_trailers> trailers_;
  std::size_t trailer_count_ = 0;
  bool body_open_ = false;      // respond() was called without end_stream and finish() not yet
  bool ended_ = false;          // finish() was called
  bool deferred_ = false;       // nghttp2 is waiting for more body (NGHTTP2_ERR_DEFERRED)
  bool request_ended_ = false;  // the peer's END_STREAM arrived
  std::size_t held_bytes_ = 0;  // request bytes not yet given back to the connection window
};

class stream_factory {
 public:
  virtual ~stream_factory() = default;
  // A new request stream began; returning null refuses it (RST_STREAM REFUSED_STREAM).
  virtual std::shared_ptr<stream> open_stream(session& s) = 0;
  // Something was queued for sending outside feed(): the owner should drain() soon (once per loop pass).
  virtual void output_ready() = 0;
};

class session {
 public:
  session(stream_factory& factory, const limits& l);
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  // Processes bytes from the peer. False: the connection is broken (protocol error or flood); drain() what
  // is left (a GOAWAY) and close.
  bool feed(std::span<const std::uint8_t> bytes);
  // Appends everything ready to send to `out`; returns false on a fatal error.
  bool drain(std::string& out);
  // Neither side has anything left to say: close the connection.
  bool finished() const;
  // The client's connection preface (the magic and its first SETTINGS) has arrived.
  bool preface_received() const { return preface_received_; }

  // Graceful close: a GOAWAY announcing the end (last stream id 2^31-1), then, with goaway(), the real one.
  void shutdown_notice();
  // The final GOAWAY; then every open stream hears on_going_away().
  void goaway();

 private:
  friend class stream;
  struct callbacks;

  void queued();  // a stream queued output outside feed()
  void resume(stream& s);
  void submit_response(stream& s, std::span<const header> headers, bool end_stream);
  stream* find(std::int32_t id);
  void close_stream(std::int32_t id, std::uint32_t error_code);
  void release_held(stream& s);

  stream_factory& factory_;
  session_memory memory_;  // before ng_'s deletion in ~session: outlives it
  nghttp2_session* ng_ = nullptr;
  stream* open_ = nullptr;  // the open streams, a list through stream::prev_/next_
  // The stream found last: a request's frames arrive together, so most lookups skip nghttp2's stream map.
  stream* last_ = nullptr;
  std::size_t header_bytes_ = 0;  // of the header block being received
  std::size_t max_header_bytes_;
  bool in_feed_ = false;
  bool broken_ = false;
  bool preface_received_ = false;
};

}  // namespace sluice::net::h2
