#pragma once
// The xDS client's settings (CONFIG_TYPE=GRPC_XDS_SOTW, reference §1.3): CONFIG_GRPC_XDS_* and XDS_CLIENT_*,
// read once at start-up; a bad value throws core::settings_error naming the setting.

#include "core/env.hpp"
#include "ratelimit/xds/client.hpp"

namespace sluice::ratelimit {

xds::client_settings read_xds_settings(const core::env_reader& env);
// Their declarations (core/setting.hpp).
std::span<const core::setting> xds_settings();

}  // namespace sluice::ratelimit
