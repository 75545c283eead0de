#include "echo/settings.hpp"

#include <unistd.h>

#include "core/strings.hpp"

namespace sluice::echo {

std::optional<settings> read_settings(const core::env_reader& env) {
  settings s;
  s.openapi_file = env.get_string("ECHO_OPENAPI_FILE", "");
  if (s.openapi_file.empty()) return std::nullopt;
  try {
    s.document = load_openapi_file(s.openapi_file);
  } catch (const openapi_error& e) {
    throw core::settings_error(core::cat("ECHO_OPENAPI_FILE: ", e.what()));
  }
  s.api_keys_file = env.get_string("API_KEYS_FILE", "");
  bool needs_keys = false;
  for (const auto& op : s.document.operations) needs_keys = needs_keys || op.api_key;
  if (needs_keys && s.api_keys_file.empty())
    throw core::settings_error(core::cat("API_KEYS_FILE is required: operations of ", s.openapi_file,
                                         " (ECHO_OPENAPI_FILE) need an API key"));
  s.jwks_cacert = env.get_string("ECHO_JWKS_CACERT", "");
  s.max_body_bytes = env.get_uint("ECHO_MAX_BODY_BYTES", s.max_body_bytes, 1, 64 << 20);
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
