#pragma once
// The holidays API's settings, read once from the environment in main. Anything invalid throws
// core::settings_error naming the variable.

#include <optional>
#include <string>

#include "core/env.hpp"

namespace sluice::holidays {

struct settings {
  std::string csv_file;       // HOLIDAYS_CSV; empty: the built-in copy of etc/holidays/holidays.csv
  bool require_key = false;   // HOLIDAYS_REQUIRE_KEY: check ?key= against API_KEYS_FILE
  std::string api_keys_file;  // API_KEYS_FILE; required when keys are
};

// nullopt when HOLIDAYS_ENABLED=false.
std::optional<settings> read_settings(const core::env_reader& env);
// Their declarations (core/setting.hpp); API_KEYS_FILE is auth's.
std::span<const core::setting> holidays_settings();

}  // namespace sluice::holidays
