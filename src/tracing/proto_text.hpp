#pragma once
// A message on one line as Go's protobuf prints it (`String()`, prototext without line breaks): upstream puts
// the request and the response in span attributes this way. Fields in field-number order, `name:value`
// separated by a space, messages as `name:{...}`, enums by name, map entries sorted by key. Go inserts a
// random extra space at times to discourage parsing; Sluice never does.

#include <string>

namespace google::protobuf {
class Message;
}

namespace sluice::tracing {

std::string go_text(const google::protobuf::Message& message);

}  // namespace sluice::tracing
