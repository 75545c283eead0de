#include "holidays/settings.hpp"

#include "auth/api_key_store.hpp"

namespace sluice::holidays {

namespace {

constexpr core::setting enabled{"HOLIDAYS_ENABLED", "bool", "true",
                                "false removes the /events/holidays* routes"};
constexpr core::setting csv{"HOLIDAYS_CSV", "path", "",
                            "the holiday list to serve; empty: the built-in copy; reloaded when it changes"};
constexpr core::setting require_key{"HOLIDAYS_REQUIRE_KEY", "bool", "false",
                                    "every request needs ?key= with a key of API_KEYS_FILE"};
constexpr core::setting all[]{enabled, csv, require_key};

}  // namespace

std::span<const core::setting> holidays_settings() {
  return all;
}

std::optional<settings> read_settings(const core::env_reader& env) {
  if (!env.get_bool(enabled)) return std::nullopt;
  settings s;
  s.csv_file = env.get_string(csv);
  s.require_key = env.get_bool(require_key);
  s.api_keys_file = env.get_string(auth::api_keys_file_setting);
  if (s.require_key && s.api_keys_file.empty())
    throw core::settings_error("API_KEYS_FILE is required when HOLIDAYS_REQUIRE_KEY=true");
  return s;
}

}  // namespace sluice::holidays
