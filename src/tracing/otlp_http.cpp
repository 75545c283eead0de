// OTLP/HTTP with binary protobuf (the OTLP specification, "OTLP/HTTP"): POST of the ExportTraceServiceRequest
// to the endpoint's path, optionally gzip-compressed, over one kept-alive connection (TLS when https).
// 2xx is success; 429, 502, 503 and 504 may be retried; any other answer drops the batch.

#include <zlib.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <optional>

#include "core/strings.hpp"
#include "core/tls_client.hpp"
#include "tracing/otlp_transport.hpp"

namespace sluice::tracing {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
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

  asio::awaitable<export_result> send(const std::string& message) override {
    http::request<http::string_body> request(http::verb::post, settings_.path, 11);
    request.set(http::field::host, core::host_port(settings_.host, settings_.port));
    request.set(http::field::user_agent, "sluice/" SLUICE_VERSION);
    request.set(http::field::content_type, "application/x-protobuf");
    for (const auto& [name, value] : settings_.headers) request.set(name, value);
    if (settings_.gzip) {
      request.set(http::field::content_encoding, "gzip");
      request.body() = gzip(message);
    } else {
      request.body() = message;
    }
    request.prepare_payload();
    const auto deadline = std::chrono::steady_clock::now() + settings_.timeout;
    // (Not a conditional expression around co_await: g++ 12 mishandles temporaries there.)
    if (tls_) co_return co_await exchange(secure_, request, deadline);
    co_return co_await exchange(plain_, request, deadline);
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
      return export_result{export_result::kind::retry, core::cat(what, ": ", ec.message())};
    };
    if (!stream) {
      tcp::resolver resolver(executor_);
      auto [resolve_ec, endpoints] =
          co_await resolver.async_resolve(settings_.host, settings_.port, use_tuple);
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
    auto text = response.body().substr(0, 200);
    co_return export_result{
        retryable(status) ? export_result::kind::retry : export_result::kind::fail,
        core::cat("the collector answered HTTP ", status, text.empty() ? "" : ": ", text)};
  }

  const exporter_settings settings_;
  asio::any_io_executor executor_;
  std::shared_ptr<asio::ssl::context> tls_;
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
