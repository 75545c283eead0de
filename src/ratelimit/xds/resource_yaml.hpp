#pragma once
// An xDS RateLimitConfig resource as the rule file it stands for (upstream's ConfigXdsProtoToYaml, reference
// §2.5), so rules from xDS go through the same loader, checks and error messages as rule files. The
// resource's `name` is the file name in errors; the unit enum becomes its name (UNKNOWN when unset, accepted
// only with `unlimited`); metadata becomes a mapping. Every string is written quoted, so "123" or "true" stay
// strings.

#include "ratelimit/config/yaml_loader.hpp"
#include "rls_conf.pb.h"

namespace sluice::ratelimit::xds {

// false with `error` set when yaml-cpp cannot write one of its strings.
bool to_config_file(const ::ratelimit::config::ratelimit::v3::RateLimitConfig& resource,
                    config::config_file& file, std::string& error);

}  // namespace sluice::ratelimit::xds
