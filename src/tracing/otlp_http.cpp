// OTLP/HTTP with binary protobuf (the OTLP specification, "OTLP/HTTP"): POST of the ExportTraceServiceRequest
// to the endpoint's path, optionally gzip-compressed, over one kept-alive connection (TLS when https).
// 2xx is success; 429, 502, 503 and 504 may be retried; any other answer drops the batch.

#include <zlib.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <optional>

#include <boost/asio/steady_timer.hpp>

#include "core/strings.hpp"
#include "core/tls_client.hpp"
#include "core/use_tuple.hpp"
#include "core/version.hpp"
#include "status.pb.h"
#include "tracing/otlp_transport.hpp"

namespace sluice::tracing {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using core::use_tuple;
constexpr std::size_t max_response_bytes = 64 * 1024;

// The gzip format (RFC 1952), as Content-Encoding: gzip wants it.
std::string gzip(const std::string& in) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::bad_alloc();
  std::string out(deflateBound(&z, static_cast<uLong>(in.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::bad_alloc();
  return out;
}

// An error answer's body: a google.rpc.Status in protobuf (OTLP/HTTP), its message; else the body's printable
// start.
std::string error_text(std::string_view content_type, const std::string& body) {
  google::rpc::Status status;
  if (content_type.starts_with("application/x-protobuf") && status.ParseFromString(body) &&
      !status.message().empty())
    return status.message().substr(0, 200);
  std::string out;
  for (char c : body.substr(0, 200)) out.push_back(c >= 0x20 && c < 0x7f ? c : '.');
  return out;
}

bool retryable(unsigned status) {
  return status == 429 || status == 502 || status == 503 || status == 504;
}

class otlp_http final : public otlp_transport {
 public:
  otlp_http(const exporter_settings& s, asio::any_io_executor ex)
      : settings_(s),
        executor_(std::move(ex)),
        tls_(core::make_tls_client_context(
            {s.tls, s.ca_file, s.client_cert_file, s.client_key_file, false},
            {"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
             "OTEL_EXPORTER_OTLP_CLIENT_KEY"})) {}

  asio::awaitable<export_result> send(const std::string& message,
                                      std::chrono::milliseconds timeout) override {
    http::request<http::string_body> request(http::verb::post, settings_.path, 11);
    request.set(http::field::host, core::host_port(settings_.host, settings_.port));
    request.set(http::field::user_agent, core::cat("sluice/", core::version));
    request.set(http::field::content_type, "application/x-protobuf");
    for (const auto& [name, value] : settings_.headers) request.set(name, value);
    if (settings_.gzip) {
      request.set(http::field::content_encoding, "gzip");
      request.body() = gzip(message);
    } else {
      request.body() = message;
    }
    request.prepare_payload();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    // A kept-alive connection that the collector (or a proxy) closed while idle fails before any answer: the
    // request goes once more, on a new connection, before that counts as a failure.
    for (int attempt = 0;; ++attempt) {
      const bool reused = tls_ ? secure_.has_value() : plain_.has_value();
      export_result result;
      // (No co_await in a conditional expression: g++ 12 mishandles temporaries there.)
      if (tls_) {
        result = co_await exchange(secure_, request, deadline);
      } else {
        result = co_await exchange(plain_, request, deadline);
      }
      if (!(result.unanswered && reused && attempt == 0)) co_return result;
    }
  }

  void cancel() override {
    resolver_.cancel();
    if (plain_) beast::get_lowest_layer(*plain_).cancel();
    if (secure_) beast::get_lowest_layer(*secure_).cancel();
  }

 private:
  using plain_stream = beast::tcp_stream;
  using secure_stream = asio::ssl::stream<beast::tcp_stream>;

  template <typename Stream>
  asio::awaitable<export_result> exchange(std::optional<Stream>& stream,
                                          http::request<http::string_body>& request,
                                          std::chrono::steady_clock::time_point deadline) {
    auto lowest = [&]() -> auto& {
      return beast::get_lowest_layer(*stream);
    };
    auto fail = [&](std::string what, const boost::system::error_code& ec) {
      stream.reset();  // a connection in an unknown state is not reused
      buffer_.clear();
      // A timeout or a cancel is not a closed connection: the collector may have the request.
      const bool unanswered = ec != beast::error::timeout && ec != asio::error::operation_aborted;
      return export_result{export_result::kind::retry, core::cat(what, ": ", ec.message()), unanswered};
    };
    if (!stream) {
      // The deadline covers the lookup too: the timer cancels it.
      resolve_deadline_.expires_at(deadline);
      resolve_deadline_.async_wait([this](const boost::system::error_code& ec) {
        if (!ec) resolver_.cancel();
      });
      auto [resolve_ec, endpoints] =
          co_await resolver_.async_resolve(settings_.host, settings_.port, use_tuple);
      resolve_deadline_.cancel();
      if (resolve_ec) co_return fail(core::cat("cannot resolve ", settings_.host), resolve_ec);
      if constexpr (std::is_same_v<Stream, secure_stream>) {
        stream.emplace(executor_, *tls_);
        core::prepare_tls_client(*stream, settings_.host, false);
      } else {
        stream.emplace(executor_);
      }
      lowest().expires_at(deadline);
      auto [connect_ec, endpoint] = co_await lowest().async_connect(endpoints, use_tuple);
      if (connect_ec) co_return fail("cannot connect", connect_ec);
      if constexpr (std::is_same_v<Stream, secure_stream>) {
        lowest().expires_at(deadline);
        auto [handshake_ec] = co_await stream->async_handshake(asio::ssl::stream_base::client, use_tuple);
        if (handshake_ec) co_return fail("TLS handshake failed", handshake_ec);
      }
    }
    lowest().expires_at(deadline);
    auto [write_ec, written] = co_await http::async_write(*stream, request, use_tuple);
    if (write_ec) co_return fail("cannot send", write_ec);
    http::response_parser<http::string_body> parser;
    parser.body_limit(max_response_bytes);
    lowest().expires_at(deadline);
    auto [read_ec, read] = co_await http::async_read(*stream, buffer_, parser, use_tuple);
    if (read_ec) co_return fail("no answer", read_ec);
    lowest().expires_never();
    const auto& response = parser.get();
    if (!response.keep_alive()) {
      stream.reset();
      buffer_.clear();
    }
    const unsigned status = response.result_int();
    if (status / 100 == 2) co_return export_result{};
    const auto text = error_text(response[http::field::content_type], response.body());
    co_return export_result{
        retryable(status) ? export_result::kind::retry : export_result::kind::fail,
        core::cat("the collector answered HTTP ", status, text.empty() ? "" : ": ", text)};
  }

  const exporter_settings settings_;
  asio::any_io_executor executor_;
  std::shared_ptr<asio::ssl::context> tls_;
  tcp::resolver resolver_{executor_};
  asio::steady_timer resolve_deadline_{executor_};
  std::optional<plain_stream> plain_;
  std::optional<secure_stream> secure_;
  beast::flat_buffer buffer_;
};

}  // namespace

std::unique_ptr<otlp_transport> make_otlp_http(const exporter_settings& settings,
                                               const asio::any_io_executor& executor) {
  return std::make_unique<otlp_http>(settings, executor);
}

}  // namespace sluice::tracing
