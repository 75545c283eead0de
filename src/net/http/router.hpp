#pragma once
// Routing table: exact path -> handler coroutine, then path prefixes (longest first), then a fallback. One
// place builds error bodies, so every module answers errors the same way: {"code": <status>, "message":
// "<what is wrong>"}.

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sluice::net::http {

using request = boost::beast::http::request<boost::beast::http::string_body>;
using response = boost::beast::http::response<boost::beast::http::string_body>;
using handler = std::function<boost::asio::awaitable<response>(const request&)>;

class router {
 public:
  void add(std::string path, handler h);
  // Answers every path that starts with `prefix` and has no exact route (a path parameter such as the
  // format of /events/holidays.{format}).
  void add_prefix(std::string prefix, handler h);
  // Answers every path no route matches (the debug server lists its paths there, as upstream's does).
  void set_fallback(handler h) { fallback_ = std::move(h); }
  // Null when no route matches and there is no fallback (the server then answers 404 with a JSON error).
  const handler* find(std::string_view path) const;

 private:
  // Transparent hashing lets find() look up a string_view without building a std::string per request.
  struct path_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, handler, path_hash, std::equal_to<>> routes_;
  std::vector<std::pair<std::string, handler>> prefixes_;  // longest first
  handler fallback_;
};

// A response with a JSON body {"code": status, "message": message}.
response json_error(const request& req, boost::beast::http::status status, std::string_view message);
// A response with the given content type and body; keep-alive and version copied from the request.
response make_response(const request& req, boost::beast::http::status status, std::string_view content_type,
                       std::string body);

}  // namespace sluice::net::http
