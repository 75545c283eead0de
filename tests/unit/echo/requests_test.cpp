// Where credentials are found in a request, and the echo / auth-info bodies.

#include <doctest/doctest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "echo/credentials.hpp"
#include "echo/handlers.hpp"
#include "net/http/query.hpp"

namespace {

using namespace sluice;
namespace bhttp = boost::beast::http;

net::http::request make(std::string target, std::string body = "") {
  net::http::request req{bhttp::verb::post, target, 11};
  req.body() = std::move(body);
  return req;
}

std::string message_of(const net::http::response& res) {
  return std::string(boost::json::parse(res.body()).at("message").as_string());
}

}  // namespace

TEST_CASE("credentials: query parameters are found by exact name and percent-decoded") {
  CHECK(net::http::query_param("/echo?key=abc", "key") == "abc");
  CHECK(net::http::query_param("/echo?x=1&key=a%2Bb%3d&key=second", "key") == "a+b=");
  CHECK(net::http::query_param("/echo?apikey=1", "key") == std::nullopt);
  CHECK(net::http::query_param("/echo?key", "key") == "");
  CHECK(net::http::query_param("/echo?key=%zz%4", "key") == "%zz%4");
  CHECK(net::http::query_param("/echo", "key") == std::nullopt);
}

TEST_CASE("credentials: API key from key, then api_key, then x-api-key") {
  auto req = make("/echo?api_key=second&key=first");
  req.set("x-api-key", "third");
  CHECK(echo::api_key(req) == "first");
  req.target("/echo?api_key=second");
  CHECK(echo::api_key(req) == "second");
  req.target("/echo");
  CHECK(echo::api_key(req) == "third");
  req.erase("x-api-key");
  CHECK(echo::api_key(req) == std::nullopt);
}

TEST_CASE("credentials: JWT from Authorization: Bearer, then access_token") {
  auto req = make("/auth/info/x?access_token=query");
  CHECK(echo::bearer_token(req) == "query");
  req.set(bhttp::field::authorization, "Bearer header");
  CHECK(echo::bearer_token(req) == "header");
  req.set(bhttp::field::authorization, "bearer lower");
  CHECK(echo::bearer_token(req) == "lower");
  req.set(bhttp::field::authorization, "header-without-scheme");
  CHECK(echo::bearer_token(req) == "query");
  req.target("/auth/info/x");
  CHECK(echo::bearer_token(req) == std::nullopt);
}

TEST_CASE("echo: the message comes back; every bad body is a 400 saying why") {
  auto ok = echo::echo_response(make("/echo", R"({"message":"héllo \"x\"","extra":1})"));
  CHECK(ok.result() == bhttp::status::ok);
  CHECK(ok.body() == R"({"message":"héllo \"x\""})");
  CHECK(ok[bhttp::field::content_type] == "application/json");

  const std::string shape = R"(; expected a JSON object like {"message": "hello"})";
  auto bad = [](std::string body) {
    auto res = echo::echo_response(make("/echo", std::move(body)));
    CHECK(res.result() == bhttp::status::bad_request);
    CHECK(boost::json::parse(res.body()).at("code") == 400);
    return message_of(res);
  };
  CHECK(bad("") == "Body is empty" + shape);
  CHECK(bad("{").starts_with("Body was not valid JSON: "));
  CHECK(bad("hello").starts_with("Body was not valid JSON: "));
  CHECK(bad(R"(["message"])") == "Body must be a JSON object, got an array" + shape);
  CHECK(bad(R"("message")") == "Body must be a JSON object, got a string" + shape);
  CHECK(bad(R"({"msg":"x"})") == R"(Body has no "message" field)" + shape);
  CHECK(bad(R"({"message":1})") == R"("message" must be a string, got a number)");
  CHECK(bad(R"({"message":null})") == R"("message" must be a string, got null)");
  CHECK(bad(R"({"message":{"a":1}})") == R"("message" must be a string, got an object)");
}

TEST_CASE("auth info: the claims as ESP forwards them, or anonymous") {
  auto req = make("/auth/info/x");
  CHECK(echo::auth_info_response(req, nullptr).body() == R"({"id":"anonymous"})");
  auth::jwt_claims claims{"iss-1",
                          "12345678",
                          "user@example.com",
                          {"aud-1", "aud-2"},
                          R"({"iss":"iss-1","sub":"12345678","n":1})"};
  auto res = echo::auth_info_response(req, &claims);
  CHECK(res.result() == bhttp::status::ok);
  CHECK(res.body() ==
        R"({"id":"12345678","email":"user@example.com","issuer":"iss-1","audiences":["aud-1","aud-2"],)"
        R"("claims":{"iss":"iss-1","sub":"12345678","n":1}})");
  claims.subject.clear();
  claims.email.clear();
  CHECK(echo::auth_info_response(req, &claims).body().starts_with(R"({"issuer":"iss-1",)"));
}
