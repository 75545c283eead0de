#include "echo/settings.hpp"

#include <unistd.h>

#include "auth/api_key_store.hpp"
#include "core/strings.hpp"

namespace sluice::echo {

namespace {

constexpr core::setting openapi_file{
    "ECHO_OPENAPI_FILE", "path", "",
    "the Swagger 2.0 document whose operations the echo API serves; empty: off"};
constexpr core::setting jwks_cacert{
    "ECHO_JWKS_CACERT", "path", "",
    "CA certificates trusted for fetching JWKS over HTTPS, besides the system's"};
constexpr core::setting max_body_bytes{"ECHO_MAX_BODY_BYTES", "whole number", "65536",
                                       "a larger /echo body is answered 400"};
constexpr core::setting all[]{openapi_file, jwks_cacert, max_body_bytes};

}  // namespace

std::span<const core::setting> echo_settings() {
  return all;
}

std::optional<settings> read_settings(const core::env_reader& env) {
  settings s;
  s.openapi_file = env.get_string(openapi_file);
  if (s.openapi_file.empty()) return std::nullopt;
  try {
    s.document = load_openapi_file(s.openapi_file);
  } catch (const openapi_error& e) {
    throw core::settings_error(core::cat("ECHO_OPENAPI_FILE: ", e.what()));
  }
  s.api_keys_file = env.get_string(auth::api_keys_file_setting);
  bool needs_keys = false;
  for (const auto& op : s.document.operations) needs_keys = needs_keys || op.api_key;
  if (needs_keys && s.api_keys_file.empty())
    throw core::settings_error(core::cat("API_KEYS_FILE is required: operations of ", s.openapi_file,
                                         " (ECHO_OPENAPI_FILE) need an API key"));
  s.jwks_cacert = env.get_string(jwks_cacert);
  s.max_body_bytes = env.get_uint(max_body_bytes, 1, 64 << 20);
  if (!s.jwks_cacert.empty() && ::access(s.jwks_cacert.c_str(), R_OK) != 0)
    throw core::settings_error(core::cat("ECHO_JWKS_CACERT: cannot read '", s.jwks_cacert, "'"));
  return s;
}

auth::jwt_options jwt_options_for(const settings& s) {
  auth::jwt_options options;
  options.service_name = s.document.service_name;
  options.extra_ca_file = s.jwks_cacert;
  return options;
}

}  // namespace sluice::echo
