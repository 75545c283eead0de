#pragma once
// RLQS_* (docs/guides/rlqs.md#settings-rlqs_): read once; anything invalid throws core::settings_error naming
// the variable.

#include "core/env.hpp"
#include "ratelimit/rlqs/settings.hpp"

namespace sluice::ratelimit {

rlqs::settings read_rlqs_settings(const core::env_reader& env);
// Their declarations (core/setting.hpp).
std::span<const core::setting> rlqs_settings();

}  // namespace sluice::ratelimit
