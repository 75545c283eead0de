#include "stats/prometheus_setup.hpp"

#include "core/env.hpp"
#include "core/log.hpp"

namespace sluice::stats {

listen_address parse_prometheus_addr(std::string_view addr) {
  const auto bad = [&] {
    return core::settings_error(core::cat("invalid value '", addr,
                                          "' for PROMETHEUS_ADDR: expected host:port or :port (e.g. :9090)"));
  };
  const auto colon = addr.rfind(':');
  if (colon == std::string_view::npos) throw bad();
  std::string_view host = addr.substr(0, colon);
  if (host.starts_with('[')) {
    if (!host.ends_with(']') || host.size() < 3) throw bad();
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    throw bad();  // an IPv6 address needs its brackets, as in Go
  }
  listen_address out;
  out.host = host.empty() ? "0.0.0.0" : std::string(host);
  if (!core::parse_unsigned(addr.substr(colon + 1), out.port)) throw bad();
  return out;
}

std::unique_ptr<prometheus_exporter> make_prometheus_exporter(const sink_settings& settings, store& s) {
  if (settings.kind != sink_kind::prometheus) return nullptr;
  parse_prometheus_addr(settings.prometheus_addr);
  if (!settings.prometheus_path.starts_with('/')) {
    throw core::settings_error(core::cat("invalid value '", settings.prometheus_path,
                                         "' for PROMETHEUS_PATH: expected a path starting with /"));
  }
  auto mapper = settings.prometheus_mapper_yaml.empty()
                    ? prometheus_mapper::builtin(settings.prometheus_response_time_as_milliseconds)
                    : prometheus_mapper::from_file(settings.prometheus_mapper_yaml);
  core::log_info("Stats initialized for Prometheus");
  return std::make_unique<prometheus_exporter>(s, std::move(mapper));
}

}  // namespace sluice::stats
