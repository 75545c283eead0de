#pragma once
// A message on one line as Go's protobuf prints it (`String()`, prototext without line breaks): upstream puts
// the request and the response in span attributes this way. Fields in the order the .proto declares them,
// `name:value` separated by a space, messages as `name:{...}`, enums by name, map entries sorted by key. Go
// inserts a random extra space at times to discourage parsing; Sluice never does.

#include <string>

#include <google/protobuf/message.h>
#include <string_view>

namespace sluice::tracing {

std::string go_text(const google::protobuf::Message& message);
// A string field's value as that text quotes it (for writers of one message type without reflection:
// ratelimit/service/request_text.hpp).
void append_go_quoted(std::string& out, std::string_view s);

}  // namespace sluice::tracing
