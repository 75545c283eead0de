#include "net/http/router.hpp"

#include <boost/beast/http/field.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <utility>

namespace sluice::net::http {

namespace bhttp = boost::beast::http;

namespace {

// Length of the well-formed UTF-8 sequence starting at s[i] (RFC 3629), 0 if there is none.
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte, narrower for some leads
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() - i < n || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  return n;
}

// Messages may echo client bytes (a path); Boost.JSON copies invalid UTF-8 through, which would make the body
// invalid JSON, so each ill-formed byte becomes U+FFFD.
std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    if (std::size_t n = utf8_sequence(s, i)) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      ++i;
    }
  }
  return out;
}

}  // namespace

void router::add(std::string path, handler h) {
  routes_.insert_or_assign(std::move(path), std::move(h));
}

const handler* router::find(std::string_view path) const {
  if (auto query = path.find('?'); query != std::string_view::npos) path = path.substr(0, query);
  auto it = routes_.find(path);
  if (it != routes_.end()) return &it->second;
  return fallback_ ? &fallback_ : nullptr;
}

response json_error(const request& req, bhttp::status status, std::string_view message) {
  // Boost.JSON does the escaping of quotes, backslashes and control characters.
  boost::json::object body;
  body["code"] = static_cast<unsigned>(status);
  body["message"] = valid_utf8(message);
  return make_response(req, status, "application/json", boost::json::serialize(body));
}

response make_response(const request& req, bhttp::status status, std::string_view content_type,
                       std::string body) {
  response res{status, req.version()};
  res.set(bhttp::field::content_type, content_type);
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

}  // namespace sluice::net::http
