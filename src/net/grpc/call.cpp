#include "net/grpc/call.hpp"

#include <google/protobuf/message_lite.h>

#include "core/strings.hpp"
#include "net/grpc/message_reader.hpp"
#include "net/grpc/timeout.hpp"

namespace sluice::net::grpc {

namespace {

using namespace std::string_view_literals;

constexpr auto content_type = "application/grpc"sv;

std::string_view status_text(status_code code, char (&buf)[4]) {
  auto n = static_cast<unsigned>(code);
  if (n < 10) {
    buf[0] = static_cast<char>('0' + n);
    return {buf, 1};
  }
  buf[0] = static_cast<char>('0' + n / 10);
  buf[1] = static_cast<char>('0' + n % 10);
  return {buf, 2};
}

}  // namespace

bool call::on_header(std::string_view name, std::string_view value) {
  if (methods_.keeps_headers() && methods_.keeps_header(name)) kept_headers_.emplace_back(name, value);
  // By length first: most of a request's headers (":scheme", ":authority", "te", "user-agent", ...) are
  // not read, and most lengths name one header we read.
  switch (name.size()) {
    case 5:
      if (name == ":path") {
        method_ = methods_.find(value);
        if (method_ == nullptr) path_ = value;
      }
      break;
    case 7:
      if (name == ":method") post_ = value == "POST";
      break;
    case 12:
      if (name == "content-type") {
        // application/grpc, optionally followed by +proto, ;charset=... (the name of the message format)
        grpc_content_type_ = value.starts_with(content_type) &&
                             (value.size() == content_type.size() || value[content_type.size()] == '+' ||
                              value[content_type.size()] == ';');
        if (!grpc_content_type_) bad_content_type_ = value;
      } else if (name == "grpc-timeout") {
        timeout_ = parse_timeout(value);
        bad_timeout_ = !timeout_;
      }
      break;
    case 13:
      if (name == "grpc-encoding") {
        if (value == "gzip") {
          encoding_ = encoding::gzip;
        } else if (value != "identity") {
          bad_encoding_ = true;
          path_ = value;  // the call fails before routing matters: reuse the field for the message
        }
      }
      break;
    default:
      break;
  }
  return true;
}

void call::on_headers_done() {
  check_headers();
  // A bidirectional client may never half-close: its call is refused at once (the stream then asks the
  // client to stop sending).
  if (rejection_ && method_ != nullptr && method_->kind == method_kind::bidi_streaming) {
    auto r = std::move(*rejection_);
    rejection_.reset();
    answer_rejection(r);
  }
}

void call::check_headers() {
  // gRPC's order: what HTTP says first (method, content type), then the gRPC headers, then routing.
  if (!post_) return reject("405", status_code::internal, "grpc: the request method must be POST");
  if (!grpc_content_type_) {
    return reject("415", status_code::internal,
                  core::cat("invalid gRPC request content-type \"", bad_content_type_, "\""));
  }
  if (bad_timeout_) return reject("200", status_code::internal, "grpc: malformed grpc-timeout");
  if (bad_encoding_) {
    return reject("200", status_code::unimplemented,
                  core::cat("grpc: Decompressor is not installed for grpc-encoding \"", path_, "\""));
  }
  if (method_ == nullptr) {
    // "/package.Service/Method": tell an unknown service from an unknown method, as grpc-go does.
    std::string_view path = path_;
    if (path.starts_with('/')) path.remove_prefix(1);
    const auto slash = path.find('/');
    const auto service = path.substr(0, slash);
    if (slash == std::string_view::npos || !methods_.has_service(service))
      return reject("200", status_code::unimplemented, core::cat("unknown service ", service));
    return reject("200", status_code::unimplemented,
                  core::cat("unknown method ", path.substr(slash + 1), " for service ", service));
  }
  if (timeout_) start_deadline(*timeout_);
  if (method_->kind == method_kind::bidi_streaming) start_stream();
}

bool call::on_data(std::span<const std::uint8_t> chunk) {
  if (done_ || rejection_) return true;  // the rest of the body is ignored
  if (messages_) {
    if (auto e = messages_->feed(chunk, [this](std::string_view m) { deliver(m); })) {
      abort_with(e->code, e->message);
    }
    return true;
  }
  if (auto e = reader_.feed(chunk)) reject("200", e->code, std::move(e->message));
  return true;
}

void call::start_stream() {
  messages_ = std::make_unique<message_stream>(reader_.max_bytes(), encoding_);
  try {
    method_->h(shared_from_this());
  } catch (const std::exception& e) {
    abort_with(status_code::internal, core::cat("internal error: ", e.what()));
  }
}

void call::deliver(std::string_view message) {
  if (done_) return;  // finished by the handler: later messages are dropped
  auto l = listener_;
  if (!l) return;
  try {
    l->on_message(message);
  } catch (const std::exception& e) {
    abort_with(status_code::internal, core::cat("internal error: ", e.what()));
  }
}

void call::listen(std::shared_ptr<stream_listener> listener) {
  listener->call_ = this;
  listener_ = std::move(listener);
}

void stream_listener::on_half_close() {
  if (call_ != nullptr) call_->finish(status_code::ok);
}

void call::on_request_end() {
  if (rejection_) {
    auto r = std::move(*rejection_);
    rejection_.reset();
    return answer_rejection(r);
  }
  if (done_) return;
  if (messages_) {
    if (auto e = messages_->finish()) return abort_with(e->code, e->message);
    if (auto l = listener_) return l->on_half_close();
    return end(status_code::ok, {});
  }
  if (auto e = reader_.finish(encoding_)) return end(e->code, e->message);
  auto self = shared_from_this();
  try {
    method_->h(self);
  } catch (const std::exception& e) {
    // One catch at the handler boundary: the client sees INTERNAL, never a hung call.
    end(status_code::internal, core::cat("internal error: ", e.what()));
  }
}

// A request refused before it ended is answered when it ends: an answer that ends the stream while the client
// is still sending leaves clients unsure what to do with the rest (curl, for one, may wait or report an
// error). The body in between is dropped (and given back to flow control as it arrives).
void call::reject(const char* http_status, status_code code, std::string message) {
  if (rejection_ || done_) return;
  rejection_ = rejection{http_status, code, std::move(message)};
}

void call::answer_rejection(const rejection& r) {
  if (done_) return;
  if (std::string_view(r.http_status) == "200") return end(r.code, r.message);
  done_ = true;
  if (deadline_) deadline_->cancel();
  char buf[4];
  const auto encoded = percent_encode(r.message);
  const h2::header headers[] = {{":status", r.http_status},
                                {"content-type", content_type},
                                {"grpc-status", status_text(r.code, buf)},
                                {"grpc-message", encoded}};
  respond(headers, true);
}

void call::on_closed(std::uint32_t) {
  if (deadline_) deadline_->cancel();
  cancelled();
  listener_.reset();  // it may hold the call: the cycle ends with the stream
}

void call::on_going_away() {
  if (done_ || method_ == nullptr || method_->kind == method_kind::unary) return;
  if (auto l = listener_) l->on_going_away();
  abort_with(status_code::unavailable, "the server is closing the connection (GOAWAY)");
}

void call::cancelled() {
  if (done_) return;
  done_ = true;
  notify_cancel();
}

void call::notify_cancel() {
  if (auto f = std::move(on_cancel_)) f();
  if (auto l = listener_) l->on_cancel();
}

// The call ends here without the handler's finish(): the status goes to the client, the handler hears it
// was cancelled (whatever it still has pending would find the call done).
void call::abort_with(status_code code, std::string_view message) {
  if (done_) return;
  end(code, message);
  notify_cancel();
}

void call::start_deadline(std::chrono::nanoseconds timeout) {
  deadline_.emplace(executor_);
  deadline_->expires_after(timeout);
  deadline_->async_wait([self = weak_from_this()](boost::system::error_code ec) {
    auto c = self.lock();
    if (ec || !c) return;
    c->abort_with(status_code::deadline_exceeded, "Deadline Exceeded");
  });
}

void call::append_message(const google::protobuf::MessageLite& m) {
  if (!headers_sent_) {
    headers_sent_ = true;
    const h2::header headers[] = {{":status", "200"}, {"content-type", content_type}};
    respond(headers, false);
  }
  const std::size_t size = m.ByteSizeLong();
  auto* out = reinterpret_cast<std::uint8_t*>(reserve(message_prefix_bytes + size));
  out[0] = 0;
  out[1] = static_cast<std::uint8_t>(size >> 24);
  out[2] = static_cast<std::uint8_t>(size >> 16);
  out[3] = static_cast<std::uint8_t>(size >> 8);
  out[4] = static_cast<std::uint8_t>(size);
  m.SerializeWithCachedSizesToArray(out + message_prefix_bytes);
}

void call::reply(const google::protobuf::MessageLite& response) {
  if (done_) return;
  append_message(response);
  end(status_code::ok, {});
}

void call::write(const google::protobuf::MessageLite& message) {
  if (done_) return;
  if (unsent_bytes() > max_unsent_bytes_) {
    // The client has not read what was written before: holding more for it would let one stream take the
    // server's memory. (One large message on a stream that keeps up is fine: only the backlog counts.)
    if (deadline_) deadline_->cancel();
    stream::reset(NGHTTP2_CANCEL);
    cancelled();
    return;
  }
  append_message(message);
}

void call::finish(status_code code, std::string_view message) {
  if (done_) return;
  end(code, message);
}

void call::end(status_code code, std::string_view message) {
  done_ = true;
  if (deadline_) deadline_->cancel();
  char buf[4];
  const auto status = status_text(code, buf);
  const auto encoded = percent_encode(message);
  if (headers_sent_) {
    const h2::header trailers[] = {{"grpc-status", status}, {"grpc-message", encoded}};
    stream::finish(std::span(trailers, message.empty() ? 1 : 2));
    return;
  }
  // Trailers-Only: one HEADERS frame with END_STREAM.
  const h2::header headers[] = {
      {":status", "200"}, {"content-type", content_type}, {"grpc-status", status}, {"grpc-message", encoded}};
  respond(std::span(headers, message.empty() ? 3 : 4), true);
}

}  // namespace sluice::net::grpc
