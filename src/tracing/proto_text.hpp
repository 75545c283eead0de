#pragma once
// A message on one line as Go's protobuf prints it (`String()`, prototext without line breaks): upstream puts
// the request and the response in span attributes this way. Fields in the order the .proto declares them,
// `name:value` separated by a space, messages as `name:{...}`, enums by name, map entries sorted by key. Go
// inserts a random extra space at times to discourage parsing; Sluice never does.

#include <string>

#include "rls.pb.h"

namespace sluice::tracing {

std::string go_text(const google::protobuf::Message& message);
// The same text for the message of every decision, written without reflection (a tenth of the cost), and for
// a descriptor's limit override (which upstream also puts in dynamic metadata).
std::string go_text(const envoy::service::ratelimit::v3::RateLimitRequest& request);
std::string go_text(
    const envoy::extensions::common::ratelimit::v3::RateLimitDescriptor::RateLimitOverride& limit);

}  // namespace sluice::tracing
