#pragma once
// gRPC server reflection (grpc.reflection.v1 and v1alpha, the same messages): what a listener serves and the
// proto files that describe it, from the descriptors compiled into the binary, so that grpcurl, ghz and
// Postman work without proto files (REFLECTION_ENABLED, on by default). Each request of the bidirectional
// stream is answered in order: list_services (the services of the method table), file_by_filename and
// file_containing_symbol (the file with every file it imports, each once), file_containing_extension and
// all_extension_numbers_of_type; what is not found is an error_response with NOT_FOUND, and the stream goes
// on.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/grpc/method_table.hpp"

namespace sluice::net::grpc {

class reflection_service {
 public:
  // Adds both versions' ServerReflectionInfo to `methods`, and lists what `methods` serves (themselves
  // included).
  static void add_to(method_table& methods);

  // The reply to one serialized ServerReflectionRequest (both versions' bytes are the same), serialized; an
  // empty optional when the bytes are no request.
  static std::optional<std::string> answer(const method_table& methods, std::string_view request);
};

}  // namespace sluice::net::grpc
