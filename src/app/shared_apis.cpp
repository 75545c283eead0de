#include "shared_apis.hpp"

#include "core/log.hpp"
#include "core/strings.hpp"

namespace sluice {

namespace asio = boost::asio;

shared_apis::shared_apis(const core::env_reader& env, const core::clock& clock, asio::io_context& control)
    : echo_settings_(echo::read_settings(env)), holidays_settings_(holidays::read_settings(env)) {
  if (echo_settings_ || holidays_settings_) {
    api_keys_ = auth::open_api_keys(echo_settings_ ? echo_settings_->api_keys_file
                                                   : holidays_settings_->api_keys_file);
  }
  if (holidays_settings_) {
    try {
      holiday_list_.emplace(holidays_settings_->csv_file, clock);
    } catch (const std::runtime_error& e) {
      throw core::settings_error(core::cat("HOLIDAYS_CSV: ", e.what()));
    }
    holidays_.emplace(*holiday_list_, api_keys_.get(), holidays_settings_->require_key, clock);
  }
  if (echo_settings_) {
    jwt_verifier_.emplace(control.get_executor(), echo::jwt_options_for(*echo_settings_));
    echo_.emplace(echo_settings_->document, api_keys_.get(), *jwt_verifier_, echo_settings_->max_body_bytes);
  }
}

void shared_apis::add_routes(net::http::router& routes) {
  if (echo_) {
    echo_->add_routes(routes);
    // The echo API shares the HTTP listener; undefined paths then get ESPv2's 404.
    routes.set_fallback([](const net::http::request& req) -> asio::awaitable<net::http::response> {
      co_return echo::not_defined(req);
    });
  }
  if (holidays_) holidays_->add_routes(routes);
}

void shared_apis::log_started() const {
  if (echo_) {
    core::log_info("Echo API: ", echo_settings_->document.operations.size(), " operations from ",
                   echo_settings_->openapi_file, "; ", api_keys_ ? api_keys_->size() : 0, " API keys from ",
                   echo_settings_->api_keys_file);
  }
  if (holidays_) {
    core::log_info("Holidays API: ", holiday_list_->current()->holidays.size(), " holidays from ",
                   holiday_list_->source(), holidays_settings_->require_key ? "; API keys required" : "");
  }
}

void shared_apis::watch(asio::any_io_executor control) {
  if (holiday_list_) holiday_list_->watch(control);
  if (api_keys_) api_keys_->watch(control);
}

void shared_apis::stop() {
  if (api_keys_) api_keys_->stop();
  if (holiday_list_) holiday_list_->stop();
}

}  // namespace sluice
