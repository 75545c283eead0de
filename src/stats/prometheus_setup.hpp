#pragma once
// What main needs to start the Prometheus sink from the settings; the listener itself lives in main, because
// stats may not depend on net.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "stats/prometheus_exporter.hpp"
#include "stats/sink_settings.hpp"

namespace sluice::stats {

struct listen_address {
  std::string host;  // "0.0.0.0" for Go's ":port" (every interface)
  std::uint16_t port = 0;
};

// PROMETHEUS_ADDR in Go's form: "host:port", "[v6 address]:port" or ":port". Throws core::settings_error.
listen_address parse_prometheus_addr(std::string_view addr);

// The exporter for USE_PROMETHEUS (null for any other sink), with the built-in mapping or the
// PROMETHEUS_MAPPER_YAML file. Throws core::settings_error for a bad mapping file, PROMETHEUS_ADDR or
// PROMETHEUS_PATH, so that every setting is checked before anything listens.
std::unique_ptr<prometheus_exporter> make_prometheus_exporter(const sink_settings& settings, store& s);

}  // namespace sluice::stats
