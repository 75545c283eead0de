#include "ratelimit/api/debug_handlers.hpp"

namespace sluice::ratelimit::api {

net::http::debug_page rlconfig_page(const service::rules_source& source) {
  return {"/rlconfig", "print out the currently loaded configuration for debugging",
          [&source](const net::http::request& req) -> boost::asio::awaitable<net::http::response> {
            auto rules = source.current();
            std::string body;
            // With several sources, first where each domain came from (one source labels nothing).
            if (rules) body = rules->dump_sources() + rules->dump();
            if (const auto* tables = source.table_names()) body += tables->dump();
            co_return net::http::make_response(req, boost::beast::http::status::ok,
                                               "text/plain; charset=utf-8", std::move(body));
          }};
}

}  // namespace sluice::ratelimit::api
