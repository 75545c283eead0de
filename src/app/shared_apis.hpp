#pragma once
// Part of the composition root: the HTTP APIs that every worker serves from one shared, thread-safe instance
// (the echo and holidays modules and the API key store they share). Their files are loaded and checked at
// construction, before anything starts; their watches run on the control thread.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <memory>
#include <optional>

#include "auth/api_key_store.hpp"
#include "auth/jwt_verifier.hpp"
#include "core/clock.hpp"
#include "core/env.hpp"
#include "echo/echo_api.hpp"
#include "echo/settings.hpp"
#include "holidays/holidays_api.hpp"
#include "holidays/settings.hpp"
#include "net/http/router.hpp"

namespace sluice {

class shared_apis {
 public:
  // Throws core::settings_error naming the setting whose file cannot be used.
  shared_apis(const core::env_reader& env, const core::clock& clock, boost::asio::io_context& control);

  void add_routes(net::http::router& routes);
  void log_started() const;
  void watch(boost::asio::any_io_executor control);
  void stop();

 private:
  std::optional<echo::settings> echo_settings_;
  std::optional<holidays::settings> holidays_settings_;
  std::unique_ptr<auth::api_key_store> api_keys_;  // API_KEYS_FILE: one store for both APIs
  std::optional<auth::jwt_verifier> jwt_verifier_;
  std::optional<echo::echo_api> echo_;
  std::optional<holidays::holiday_list> holiday_list_;
  std::optional<holidays::holidays_api> holidays_;
};

}  // namespace sluice
