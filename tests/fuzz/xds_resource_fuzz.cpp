// libFuzzer: bytes from an xDS server, read as a RateLimitConfig resource (protobuf binary), written as the
// rule file it stands for and loaded (ratelimit/xds/resource_yaml). Checks: no crash; a resource that cannot
// be written says why; an error names the resource; and rules that load hold what the resource said: its
// domain, each top-level descriptor under its composite key with the same limit, unlimited flag and shadow
// mode.
//
// Build and run: scripts/fuzz xds_resource [seconds]

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "ratelimit/config/yaml_loader.hpp"
#include "ratelimit/xds/resource_yaml.hpp"
#include "rls_conf.pb.h"

namespace {

namespace rls_conf = ::ratelimit::config::ratelimit::v3;
using namespace sluice::ratelimit;

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  rls_conf::RateLimitConfig resource;
  if (!resource.ParseFromArray(data, static_cast<int>(size))) return 0;
  config::config_file file;
  std::string error;
  if (!xds::to_config_file(resource, file, error)) {
    check(!error.empty());
    return 0;
  }
  sluice::stats::store stats;
  const config::config_file files[] = {file};
  auto loaded = config::load_rules(files, false, stats);
  if (!loaded.rules) {
    check(loaded.error.starts_with(resource.name() + ": "));
    return 0;
  }
  const auto* domain = loaded.rules->find_domain(resource.domain());
  check(domain != nullptr);
  for (const auto& d : resource.descriptors()) {
    const auto composite = d.value().empty() ? d.key() : d.key() + "_" + d.value();
    const auto it = domain->children.find(composite);
    check(it != domain->children.end());
    const auto& node = *it->second;
    check(node.shadow_mode == d.shadow_mode() && node.quota_mode == d.quota_mode());
    check(node.limit.has_value() == d.has_rate_limit());
    if (d.has_rate_limit()) {
      check(node.limit->requests_per_unit == d.rate_limit().requests_per_unit());
      check(node.limit->unlimited == d.rate_limit().unlimited());
      check(node.limit->name == d.rate_limit().name());
    }
  }
  return 0;
}
