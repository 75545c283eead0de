#include "holidays/settings.hpp"

namespace sluice::holidays {

std::optional<settings> read_settings(const core::env_reader& env) {
  if (!env.get_bool("HOLIDAYS_ENABLED", true)) return std::nullopt;
  settings s;
  s.csv_file = env.get_string("HOLIDAYS_CSV", "");
  s.require_key = env.get_bool("HOLIDAYS_REQUIRE_KEY", false);
  s.api_keys_file = env.get_string("API_KEYS_FILE", "");
  if (s.require_key && s.api_keys_file.empty())
    throw core::settings_error("API_KEYS_FILE is required when HOLIDAYS_REQUIRE_KEY=true");
  return s;
}

}  // namespace sluice::holidays
