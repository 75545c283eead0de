#pragma once
// The echo API's settings, read once from the environment in main. The API is off unless ECHO_OPENAPI_FILE
// is set; then API_KEYS_FILE is required. Anything invalid throws core::settings_error naming the variable.

#include <memory>
#include <optional>
#include <string>

#include "auth/api_key_store.hpp"
#include "auth/jwt_verifier.hpp"
#include "core/env.hpp"
#include "echo/openapi.hpp"

namespace sluice::echo {

struct settings {
  std::string openapi_file;   // ECHO_OPENAPI_FILE
  openapi_document document;  // its content, loaded and checked
  std::string api_keys_file;  // API_KEYS_FILE; may be empty when no operation needs a key
  std::string jwks_cacert;    // ECHO_JWKS_CACERT: trusted for JWKS fetches besides the system CAs
  std::size_t max_body_bytes = 64 * 1024;  // ECHO_MAX_BODY_BYTES: a larger /echo body is a 400
};

// nullopt when the echo API is off.
std::optional<settings> read_settings(const core::env_reader& env);
// Their declarations (core/setting.hpp); API_KEYS_FILE is auth's.
std::span<const core::setting> echo_settings();

auth::jwt_options jwt_options_for(const settings& s);

}  // namespace sluice::echo
