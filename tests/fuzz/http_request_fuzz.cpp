// libFuzzer: arbitrary bytes as what an HTTP/1.1 client sends on one connection. They are parsed as the
// server does (Beast's request parser, a fresh one per request, with server_options' default limits: 8 KB of
// header, 1 MB of body), and each request that parses is dispatched through one router holding the real
// routes of the rate limit service (/json, /healthcheck: memory backend, fake clock, rules below), the echo
// API (the sample OpenAPI document and API keys of etc/echo) and the holidays API (the built-in list, keys
// required), until the bytes run out, a request fails to parse or one does not keep the connection alive.
// Checks: no crash, no leak, no exception out of a handler (the server would answer 500); every response is
// well formed: the request's HTTP version, a Content-Length that matches its body, a body that is JSON when
// it says so, no 500 or 503, and it serializes.
//
// JWT providers: the sample's two, with their keys read from tests/fuzz/http_request_jwks.json (file://)
// instead of Google's servers; tokens are verified for real (the seed corpus has one signed with that key).
// The session coroutine itself (src/net/http/session.hpp, with its sockets and timers) is not compiled: its
// reading loop is mirrored in read_request below. Every coroutine here is compiled without UBSan's `function`
// check (see meson.build).
//
// Build and run: scripts/fuzz http_request [seconds]

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "auth/api_key_store.hpp"
#include "auth/jwt_verifier.hpp"
#include "core/clock.hpp"
#include "core/health.hpp"
#include "core/read_file.hpp"
#include "echo/echo_api.hpp"
#include "echo/openapi.hpp"
#include "holidays/holiday_list.hpp"
#include "holidays/holidays_api.hpp"
#include "net/http/router.hpp"
#include "net/http/server.hpp"
#include "ratelimit/api/http_handlers.hpp"
#include "ratelimit/backends/memory/memory_backend.hpp"
#include "ratelimit/config/yaml_loader.hpp"
#include "ratelimit/limiter/limiter.hpp"
#include "ratelimit/service/service.hpp"

namespace asio = boost::asio;

namespace {

using namespace sluice;
namespace bhttp = boost::beast::http;
using boost::system::error_code;
using parser_type = bhttp::request_parser<bhttp::string_body>;

void check(bool ok) {
  if (!ok) std::abort();
}

constexpr std::string_view rules = R"(
domain: fuzz
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: remote_address
    value: 10.0.0.1
    rate_limit: {unit: minute, requests_per_unit: 1, name: one}
  - key: path
    value: "/api/*"
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: user
    detailed_metric: true
    rate_limit: {unit: day, requests_per_unit: 5}
    descriptors:
      - key: action
        value_to_metric: true
        rate_limit: {unit: week, requests_per_unit: 1, replaces: [{name: one}]}
  - key: free
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 0}
)";

std::string etc_file(const char* name) {
  auto text = core::read_file(std::string(SLUICE_ETC_DIR) + "/" + name);
  if (!text) {
    std::fprintf(stderr, "http_request fuzzer: %s\n", text.error().c_str());
    std::abort();
  }
  return *text;
}

// etc/echo/openapi.yaml with every JWKS URI pointing at the harness's key set.
std::string sample_openapi() {
  std::string text = etc_file("echo/openapi.yaml");
  const std::string local = "x-google-jwks_uri: \"file://" SLUICE_FUZZ_DIR "/http_request_jwks.json\"";
  for (std::size_t at = text.find("x-google-jwks_uri:"); at != std::string::npos;
       at = text.find("x-google-jwks_uri:", at + local.size())) {
    text.replace(at, text.find('\n', at) - at, local);
  }
  return text;
}

// Everything the routes point into, made once: the decisions, the APIs and their files.
struct world {
  asio::io_context ioc;
  core::fake_clock clock{1'700'000'000};
  stats::store stats;
  core::health health;
  ratelimit::backends::memory::memory_backend backend{clock, 10'000};
  ratelimit::limiter::limiter limiter{
      ratelimit::limiter::settings{.expiration_jitter_max_seconds = 0, .local_cache_size_bytes = 64 * 1024},
      clock};
  ratelimit::service::rate_limit_service service{{.response_headers_enabled = true}, limiter, backend, stats};
  auth::api_key_store keys{std::string(SLUICE_ETC_DIR) + "/echo/api_keys.yaml"};
  echo::openapi_document document = echo::parse_openapi(sample_openapi());
  auth::jwt_verifier verifier{ioc.get_executor(), auth::jwt_options{.service_name = document.service_name,
                                                                    .verified_cache_entries = 16}};
  echo::echo_api echo{document, &keys, verifier};
  holidays::holiday_list list{"", clock};
  holidays::holidays_api holidays{list, &keys, true, clock};
  net::http::router routes;
  net::http::server_options limits;

  world() {
    const std::vector<ratelimit::config::config_file> files{{"fuzz.yaml", std::string(rules)}};
    auto loaded = ratelimit::config::load_rules(files, false, stats);
    if (!loaded.rules) {
      std::fprintf(stderr, "http_request fuzzer: %s\n", loaded.error.c_str());
      std::abort();
    }
    service.set_rules(loaded.rules);
    ratelimit::api::add_http_routes(routes, service, stats, health, nullptr);
    echo.add_routes(routes);
    routes.set_fallback([](const net::http::request& req) -> asio::awaitable<net::http::response> {
      co_return echo::not_defined(req);
    });
    holidays.add_routes(routes);
  }
};

// The session's reading loop (session::read_request) over bytes that are all there: parse what there is, and
// at the end of the bytes, the end of the stream.
error_code read_request(parser_type& parser, std::string_view& rest) {
  if (!rest.empty()) {
    for (;;) {
      error_code ec;
      const std::size_t used = parser.put(asio::buffer(rest.data(), rest.size()), ec);
      rest.remove_prefix(used);
      if (parser.is_done()) return {};
      if (ec && ec != bhttp::error::need_more) return ec;
      if (ec || used == 0 || rest.empty()) break;
    }
  }
  if (!parser.got_some()) return bhttp::error::end_of_stream;
  error_code ec;
  parser.put_eof(ec);
  if (!ec && !parser.is_done()) ec = bhttp::error::partial_message;
  return ec;
}

net::http::response dispatch(world& w, const net::http::request& req) {
  const net::http::handler* h = w.routes.find(req.target());
  check(h != nullptr);  // the echo API's fallback answers every other path
  std::optional<net::http::response> res;
  // A handler's exception is rethrown by run(): a request made a handler fail.
  asio::co_spawn(w.ioc, (*h)(req), [&res](std::exception_ptr e, net::http::response r) {
    if (e) std::rethrow_exception(e);
    res = std::move(r);
  });
  w.ioc.restart();
  w.ioc.run();
  check(res.has_value());
  return std::move(*res);
}

void check_response(const net::http::request& req, const net::http::response& res) {
  check(res.version() == req.version());
  check(res.result() != bhttp::status::internal_server_error &&
        res.result() != bhttp::status::service_unavailable);
  const auto length = res.find(bhttp::field::content_length);
  check(length != res.end() && length->value() == std::to_string(res.body().size()));
  if (std::string_view(res[bhttp::field::content_type]).starts_with("application/json")) {
    error_code ec;
    (void)boost::json::parse(res.body(), ec);
    check(!ec);
  }
  std::ostringstream out;
  out << res;
  check(out.good());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static world w;
  // Every counter of the previous input has expired: each input starts from empty windows.
  w.clock.advance(400 * 86400);
  w.backend.sweep();
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  for (int n = 0; n < 8; ++n) {
    parser_type parser;
    parser.header_limit(static_cast<std::uint32_t>(w.limits.max_header_bytes));
    parser.body_limit(w.limits.max_body_bytes);
    parser.eager(true);
    if (read_request(parser, rest)) return 0;  // the server answers 400/413/431 or closes
    const net::http::request& req = parser.get();
    const auto res = dispatch(w, req);
    check_response(req, res);
    if (!req.keep_alive() || res.need_eof()) return 0;
  }
  return 0;
}
