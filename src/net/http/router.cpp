#include "net/http/router.hpp"

#include <algorithm>
#include <boost/beast/http/field.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <utility>

#include "core/strings.hpp"

namespace sluice::net::http {

namespace bhttp = boost::beast::http;

namespace {

// Messages may echo client bytes (a path); Boost.JSON copies invalid UTF-8 through, which would make the body
// invalid JSON, so each ill-formed byte becomes U+FFFD.
std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    if (std::size_t n = core::utf8_sequence(s, i)) {
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

void router::add_prefix(std::string prefix, handler h) {
  auto longer = [&](const auto& entry) { return entry.first.size() >= prefix.size(); };
  auto at = std::find_if_not(prefixes_.begin(), prefixes_.end(), longer);
  prefixes_.insert(at, {std::move(prefix), std::move(h)});
}

const handler* router::find(std::string_view path) const {
  if (auto query = path.find('?'); query != std::string_view::npos) path = path.substr(0, query);
  auto it = routes_.find(path);
  if (it != routes_.end()) return &it->second;
  for (const auto& [prefix, h] : prefixes_)
    if (path.starts_with(prefix)) return &h;
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
