#include "echo/handlers.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "core/strings.hpp"

namespace sluice::echo {

namespace json = boost::json;
namespace bhttp = boost::beast::http;

namespace {

std::string_view kind_name(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "a boolean";
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_:
      return "a number";
    case json::kind::string:
      return "a string";
    case json::kind::array:
      return "an array";
    case json::kind::object:
      return "an object";
  }
  return "a value";
}

net::http::response json_ok(const net::http::request& req, const json::object& body) {
  return net::http::make_response(req, bhttp::status::ok, "application/json", json::serialize(body));
}

}  // namespace

net::http::response echo_response(const net::http::request& req, std::size_t max_body_bytes) {
  constexpr std::string_view shape = R"(; expected a JSON object like {"message": "hello"})";
  if (req.body().size() > max_body_bytes)
    return net::http::json_error(
        req, bhttp::status::bad_request,
        core::cat("Body is larger than ", max_body_bytes, " bytes (ECHO_MAX_BODY_BYTES)", shape));
  if (req.body().empty())
    return net::http::json_error(req, bhttp::status::bad_request, core::cat("Body is empty", shape));
  boost::system::error_code ec;
  json::value body = json::parse(req.body(), ec);
  if (ec)
    return net::http::json_error(req, bhttp::status::bad_request,
                                 core::cat("Body was not valid JSON: ", ec.message(), shape));
  if (!body.is_object())
    return net::http::json_error(req, bhttp::status::bad_request,
                                 core::cat("Body must be a JSON object, got ", kind_name(body), shape));
  const json::value* message = body.as_object().if_contains("message");
  if (message == nullptr)
    return net::http::json_error(req, bhttp::status::bad_request,
                                 core::cat("Body has no \"message\" field", shape));
  if (!message->is_string())
    return net::http::json_error(req, bhttp::status::bad_request,
                                 core::cat("\"message\" must be a string, got ", kind_name(*message)));
  json::object out;
  out["message"] = *message;
  return json_ok(req, out);
}

net::http::response auth_info_response(const net::http::request& req, const auth::jwt_claims* claims) {
  json::object out;
  if (claims == nullptr) {
    out["id"] = "anonymous";
    return json_ok(req, out);
  }
  if (!claims->subject.empty()) out["id"] = claims->subject;
  if (!claims->email.empty()) out["email"] = claims->email;
  out["issuer"] = claims->issuer;
  if (!claims->audiences.empty()) {
    json::array audiences;
    for (const auto& a : claims->audiences) audiences.emplace_back(a);
    out["audiences"] = std::move(audiences);
  }
  // The verifier parsed the payload as a JSON object already: its text goes in as it is, with no second
  // parse.
  std::string body = json::serialize(out);
  body.pop_back();  // the closing brace: `out` always has "issuer", so a member follows
  body += ",\"claims\":";
  body += claims->payload_json;
  body += '}';
  return net::http::make_response(req, bhttp::status::ok, "application/json", std::move(body));
}

}  // namespace sluice::echo
