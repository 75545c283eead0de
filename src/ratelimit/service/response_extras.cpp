#include "ratelimit/service/response_extras.hpp"

#include <google/protobuf/struct.pb.h>

#include <utility>

#include "core/strings.hpp"
#include "tracing/proto_text.hpp"

namespace sluice::ratelimit::service {

namespace {

using code = rls_response;

// Adds the fields of `from` that `into` lacks; where both hold an object, recursively.
void merge_first_wins(google::protobuf::Struct& into, const google::protobuf::Struct& from) {
  auto& fields = *into.mutable_fields();
  for (const auto& [key, value] : from.fields()) {
    auto [it, added] = fields.try_emplace(key, value);
    if (!added && it->second.has_struct_value() && value.has_struct_value()) {
      merge_first_wins(*it->second.mutable_struct_value(), value.struct_value());
    }
  }
}

}  // namespace

// upstream's choice (reference §6.2): the limited status with the least remaining, but the last OVER_LIMIT
// of a normal (not quota) descriptor wins. The same figures go to the client (response headers) and, with
// LIMIT_REQUEST_HEADERS_ENABLED, to the upstream service (request headers).
void add_limit_headers(rls_response& response, const settings& settings,
                       std::span<const limiter::descriptor_work> items) {
  const code::DescriptorStatus* chosen = nullptr;
  std::uint32_t min_remaining = UINT32_MAX;
  for (int i = 0; i < response.statuses_size(); ++i) {
    const auto& s = response.statuses(i);
    if (s.has_current_limit() && s.limit_remaining() < min_remaining) {
      min_remaining = s.limit_remaining();
      chosen = &s;
    }
    if (s.code() == code::OVER_LIMIT && !items[static_cast<std::size_t>(i)].quota) chosen = &s;
  }
  if (chosen == nullptr) return;
  const std::string limit = core::cat(chosen->current_limit().requests_per_unit());
  const std::string remaining = core::cat(chosen->limit_remaining());
  const std::string reset = core::cat(chosen->duration_until_reset().seconds());
  auto add = [&](auto* headers, const limit_header_names& names) {
    for (const auto& [name, value] :
         {std::pair{&names.limit, &limit}, {&names.remaining, &remaining}, {&names.reset, &reset}}) {
      auto* h = headers->Add();
      h->set_key(*name);
      h->set_value(*value);
    }
  };
  if (settings.response_headers_enabled)
    add(response.mutable_response_headers_to_add(), settings.response_headers);
  if (settings.request_headers_enabled)
    add(response.mutable_request_headers_to_add(), settings.request_headers);
}

// RESPONSE_DYNAMIC_METADATA (reference §6.1): the request as upstream describes it, and the `metadata` of
// every rule whose descriptor passed, merged in descriptor order (the first value of a key wins, nested
// objects merge). Unlike upstream, a rule keeps its metadata with detailed_metric or value_to_metric, an
// unlimited rule's metadata is included, and the rules' own objects are never modified.
void add_dynamic_metadata(rls_response& response, const rls_request& request,
                          std::span<const config::descriptor_node* const> nodes) {
  auto& fields = *response.mutable_dynamic_metadata()->mutable_fields();
  fields["domain"].set_string_value(request.domain());
  auto* descriptors = fields["descriptors"].mutable_list_value();
  for (const auto& d : request.descriptors()) {
    auto& described = *descriptors->add_values()->mutable_struct_value()->mutable_fields();
    auto* entries = described["entries"].mutable_list_value();
    for (const auto& e : d.entries())
      entries->add_values()->set_string_value(core::cat(e.key(), "=", e.value()));
    // The override as Go's prototext prints it, as upstream puts it there.
    if (d.has_limit()) described["limit"].set_string_value(tracing::go_text(d.limit()));
    if (d.has_hits_addend())
      described["hitsAddend"].set_number_value(static_cast<double>(d.hits_addend().value()));
  }
  if (request.hits_addend() != 0) fields["hitsAddend"].set_number_value(request.hits_addend());

  google::protobuf::Struct merged;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto* node = nodes[i];
    if (node == nullptr || node->metadata == nullptr) continue;
    if (response.statuses(static_cast<int>(i)).code() == code::OVER_LIMIT) continue;
    merge_first_wins(merged, *node->metadata);
  }
  if (!merged.fields().empty()) fields["metadata"].mutable_struct_value()->Swap(&merged);
}

}  // namespace sluice::ratelimit::service
