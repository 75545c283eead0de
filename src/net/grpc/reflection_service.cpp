#include "net/grpc/reflection_service.hpp"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string_view>
#include <utility>

#include "core/strings.hpp"
#include "net/grpc/call.hpp"
#include "reflection.pb.h"

namespace sluice::net::grpc {

namespace {

namespace pb = google::protobuf;
namespace rf = ::grpc::reflection::v1;

constexpr int not_found = 5;
constexpr int invalid_argument = 3;

// Sluice compiles its .proto files from one flat folder (proto/), but clients know them by their upstream
// paths: a client that already holds Envoy's protos would otherwise see the same types in two files. Files
// are served under these names, in their own name and in their imports (the well-known types are already).
constexpr std::pair<std::string_view, std::string_view> canonical_paths[] = {
    {"base.proto", "envoy/config/core/v3/base.proto"},
    {"discovery.proto", "envoy/service/discovery/v3/discovery.proto"},
    {"health.proto", "grpc/health/v1/health.proto"},
    {"otlp_common.proto", "opentelemetry/proto/common/v1/common.proto"},
    {"otlp_resource.proto", "opentelemetry/proto/resource/v1/resource.proto"},
    {"otlp_trace.proto", "opentelemetry/proto/trace/v1/trace.proto"},
    {"otlp_trace_service.proto", "opentelemetry/proto/collector/trace/v1/trace_service.proto"},
    {"ratelimit.proto", "envoy/extensions/common/ratelimit/v3/ratelimit.proto"},
    {"ratelimit_strategy.proto", "envoy/type/v3/ratelimit_strategy.proto"},
    {"ratelimit_unit.proto", "envoy/type/v3/ratelimit_unit.proto"},
    {"reflection.proto", "grpc/reflection/v1/reflection.proto"},
    {"reflection_v1alpha.proto", "grpc/reflection/v1alpha/reflection.proto"},
    {"rlqs.proto", "envoy/service/rate_limit_quota/v3/rlqs.proto"},
    {"rls.proto", "envoy/service/ratelimit/v3/rls.proto"},
    {"rls_conf.proto", "ratelimit/config/ratelimit/v3/rls_conf.proto"},
    {"status.proto", "google/rpc/status.proto"},
    {"token_bucket.proto", "envoy/type/v3/token_bucket.proto"},
};

std::string served_name(const std::string& compiled) {
  for (const auto& [flat, canonical] : canonical_paths)
    if (compiled == flat) return std::string(canonical);
  return compiled;
}

// The compiled file a served name stands for; a flat name is not served (it would be a second name).
const pb::FileDescriptor* find_served_file(const pb::DescriptorPool& pool, const std::string& served) {
  for (const auto& [flat, canonical] : canonical_paths) {
    if (served == canonical) return pool.FindFileByName(std::string(flat));
    if (served == flat) return nullptr;
  }
  return pool.FindFileByName(served);
}

// The file and every file it imports, each once, dependencies first (as protoc would read them).
void add_file(const pb::FileDescriptor& file, std::set<std::string>& seen, rf::FileDescriptorResponse& out) {
  if (!seen.insert(file.name()).second) return;
  for (int i = 0; i < file.dependency_count(); ++i) add_file(*file.dependency(i), seen, out);
  pb::FileDescriptorProto proto;
  file.CopyTo(&proto);
  proto.set_name(served_name(proto.name()));
  for (auto& dependency : *proto.mutable_dependency()) dependency = served_name(dependency);
  proto.SerializeToString(out.add_file_descriptor_proto());
}

void error(rf::ServerReflectionResponse& out, int code, std::string message) {
  auto* e = out.mutable_error_response();
  e->set_error_code(code);
  e->set_error_message(std::move(message));
}

void answer_file(rf::ServerReflectionResponse& out, const pb::FileDescriptor* file, std::string_view what) {
  if (file == nullptr) return error(out, not_found, core::cat(what, " is not known to this server"));
  std::set<std::string> seen;
  add_file(*file, seen, *out.mutable_file_descriptor_response());
}

// "package.Service" of each method path "/package.Service/Method", once each, sorted.
std::vector<std::string> services_of(const method_table& methods) {
  std::set<std::string> names;
  for (const auto& path : methods.paths()) {
    const auto slash = path.find('/', 1);
    if (path.size() > 1 && slash != std::string::npos) names.insert(path.substr(1, slash - 1));
  }
  return {names.begin(), names.end()};
}

// The reply to one request; false when the bytes are no request.
bool fill(const method_table& methods, std::string_view bytes, rf::ServerReflectionResponse& out) {
  rf::ServerReflectionRequest request;
  if (!request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return false;
  const auto* pool = pb::DescriptorPool::generated_pool();
  out.set_valid_host(request.host());
  *out.mutable_original_request() = request;
  switch (request.message_request_case()) {
    case rf::ServerReflectionRequest::kListServices:
      for (auto& name : services_of(methods))
        out.mutable_list_services_response()->add_service()->set_name(name);
      break;
    case rf::ServerReflectionRequest::kFileByFilename:
      answer_file(out, find_served_file(*pool, request.file_by_filename()),
                  core::cat("file '", request.file_by_filename(), "'"));
      break;
    case rf::ServerReflectionRequest::kFileContainingSymbol:
      answer_file(out, pool->FindFileContainingSymbol(request.file_containing_symbol()),
                  core::cat("symbol '", request.file_containing_symbol(), "'"));
      break;
    case rf::ServerReflectionRequest::kFileContainingExtension: {
      const auto& e = request.file_containing_extension();
      const auto* type = pool->FindMessageTypeByName(e.containing_type());
      const auto* ext = type != nullptr ? pool->FindExtensionByNumber(type, e.extension_number()) : nullptr;
      answer_file(out, ext != nullptr ? ext->file() : nullptr,
                  core::cat("extension ", e.extension_number(), " of '", e.containing_type(), "'"));
      break;
    }
    case rf::ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const auto* type = pool->FindMessageTypeByName(request.all_extension_numbers_of_type());
      if (type == nullptr) {
        error(out, not_found,
              core::cat("type '", request.all_extension_numbers_of_type(), "' is not known to this server"));
        break;
      }
      std::vector<const pb::FieldDescriptor*> extensions;
      pool->FindAllExtensions(type, &extensions);
      auto* numbers = out.mutable_all_extension_numbers_response();
      numbers->set_base_type_name(type->full_name());
      for (const auto* f : extensions) numbers->add_extension_number(f->number());
      break;
    }
    case rf::ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET:
      error(out, invalid_argument, "the request asks for nothing (set one of its message_request fields)");
      break;
  }
  return true;
}

class reflection_stream final : public stream_listener {
 public:
  explicit reflection_stream(const method_table& methods) : methods_(methods) {}
  void on_message(std::string_view bytes) override {
    rf::ServerReflectionResponse response;
    if (!fill(methods_, bytes, response))
      return call_->finish(status_code::invalid_argument, "the message is not a ServerReflectionRequest");
    call_->write(response);
  }

 private:
  const method_table& methods_;
};

}  // namespace

std::optional<std::string> reflection_service::answer(const method_table& methods, std::string_view bytes) {
  rf::ServerReflectionResponse out;
  if (!fill(methods, bytes, out)) return std::nullopt;
  return out.SerializeAsString();
}

void reflection_service::add_to(method_table& methods) {
  for (const char* path : {"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                           "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"}) {
    methods.add(
        path,
        [&methods](const std::shared_ptr<call>& c) {
          c->listen(std::make_shared<reflection_stream>(methods));
        },
        method_kind::bidi_streaming);
  }
}

}  // namespace sluice::net::grpc
