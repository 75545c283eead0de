#include "ratelimit/service/response_extras.hpp"

#include <google/protobuf/struct.pb.h>

#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "core/strings.hpp"
#include "ratelimit/service/request_text.hpp"

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

// A descriptor's k-th limit as its rule names it: the limit's `name`, else the stats key it counts under (an
// override: its own key).
std::string limit_name(std::string_view domain, const limiter::descriptor_work& item,
                       const config::descriptor_node* node, std::size_t k) {
  if (node == nullptr || !node->limit) return override_stats_key(domain, item.entries);
  const auto& limit = node->limit_at(k);
  return limit.name.empty() ? config::limit_stats_key(*node, limit) : limit.name;
}

// An RFC 9651 String: printable ASCII, '"' and '\\' escaped; other bytes become '?'.
void append_sf_string(std::string& out, std::string_view text) {
  out += '"';
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else {
      out += c >= 0x20 && c <= 0x7e ? c : '?';
    }
  }
  out += '"';
}

// LIMIT_RESPONSE_HEADERS_FORMAT=ietf (draft-ietf-httpapi-ratelimit-headers): RateLimit-Policy lists every
// limit that applied (q, and w its window in seconds, or qu="concurrent-requests" for a concurrency limit),
// and RateLimit the most restrictive one's r and t: an over one, else the least remaining, then the longest
// to reset. Shadow-mode limits are left out.
void add_ietf_headers(rls_response& response, std::span<const limiter::descriptor_work> items,
                      std::span<const config::descriptor_node* const> nodes, std::string_view domain,
                      bool global_shadow_mode) {
  if (global_shadow_mode) return;
  std::string policy;
  std::vector<std::string> listed;
  std::optional<std::size_t> tightest;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& item = items[i];
    for (std::size_t k = 0; k < item.limits.size(); ++k) {
      const auto& limit = item.limits[k].limit;
      if (limit.shadow_mode) continue;
      std::string one;
      append_sf_string(one, limit_name(domain, item, nodes[i], k));
      one += core::cat(";q=", limit.requests_per_unit);
      if (limit.algorithm == config::algorithm::concurrency) {
        one += ";qu=\"concurrent-requests\"";
      } else {
        one += core::cat(";w=", config::unit_seconds(limit.unit) * limit.unit_multiplier);
      }
      if (std::ranges::find(listed, one) != listed.end()) continue;
      if (!policy.empty()) policy += ", ";
      policy += one;
      listed.push_back(std::move(one));
    }
    if (item.limits.empty() || item.negative || item.limits[item.shown].limit.shadow_mode) continue;
    auto rank = [&](std::size_t j) {
      const auto& s = response.statuses(static_cast<int>(j));
      return std::tuple(items[j].over, -static_cast<std::int64_t>(s.limit_remaining()),
                        s.duration_until_reset().seconds());
    };
    if (!tightest || rank(i) > rank(*tightest)) tightest = i;
  }
  auto* headers = response.mutable_response_headers_to_add();
  if (!policy.empty()) {
    auto* h = headers->Add();
    h->set_key("RateLimit-Policy");
    h->set_value(std::move(policy));
  }
  if (tightest) {
    const auto& item = items[*tightest];
    const auto& status = response.statuses(static_cast<int>(*tightest));
    std::string value;
    append_sf_string(value, limit_name(domain, item, nodes[*tightest], item.shown));
    value += core::cat(";r=", item.over ? 0 : status.limit_remaining(),
                       ";t=", status.duration_until_reset().seconds());
    auto* h = headers->Add();
    h->set_key("RateLimit");
    h->set_value(std::move(value));
  }
}

}  // namespace

// upstream's choice (reference §6.2): the limited status with the least remaining, but the last OVER_LIMIT
// of a normal (not quota) descriptor wins. The same figures go to the client (response headers) and, with
// LIMIT_REQUEST_HEADERS_ENABLED, to the upstream service (request headers). With
// LIMIT_RESPONSE_HEADERS_FORMAT=ietf, the client gets the IETF draft's fields instead (ietf_headers).
void add_limit_headers(rls_response& response, const settings& settings,
                       std::span<const limiter::descriptor_work> items,
                       std::span<const config::descriptor_node* const> nodes, std::string_view domain) {
  if (settings.response_headers_enabled && settings.ietf_headers)
    add_ietf_headers(response, items, nodes, domain, settings.global_shadow_mode);
  const bool upstream_response = settings.response_headers_enabled && !settings.ietf_headers;
  if (!upstream_response && !settings.request_headers_enabled) return;
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
  if (upstream_response) add(response.mutable_response_headers_to_add(), settings.response_headers);
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
    if (d.has_limit()) described["limit"].set_string_value(go_text(d.limit()));
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

std::string override_stats_key(std::string_view domain, std::span<const config::entry> entries) {
  std::string key(domain);
  for (const auto& e : entries) {
    key += core::cat(".", e.key);
    if (!e.value.empty()) key += core::cat("_", e.value);
  }
  return key;
}

void add_limited_by(rls_response& response, std::string_view domain,
                    std::span<const limiter::descriptor_work> items,
                    std::span<const config::descriptor_node* const> nodes, bool global_shadow_mode) {
  google::protobuf::ListValue list;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& item = items[i];
    if (!item.over || item.limits.empty()) continue;
    const auto& applied = item.limits[item.shown].limit;
    const auto* node = nodes[i];
    auto& entry = *list.add_values()->mutable_struct_value()->mutable_fields();
    entry["domain"].set_string_value(std::string(domain));
    // A rule's limit counts under its node's key (and its suffix, one of several); an override under its own.
    std::string rule;
    if (node == nullptr) {
      rule = override_stats_key(domain, item.entries);
    } else {
      rule = config::limit_stats_key(*node, node->limit_at(item.shown));
    }
    entry["rule"].set_string_value(std::move(rule));
    auto* entries = entry["entries"].mutable_list_value();
    for (const auto& e : item.entries)
      entries->add_values()->set_string_value(core::cat(e.key, "=", e.value));
    entry["shadow"].set_bool_value(applied.shadow_mode || global_shadow_mode);
    auto& limit = *entry["limit"].mutable_struct_value()->mutable_fields();
    limit["requests_per_unit"].set_number_value(applied.requests_per_unit);
    limit["unit"].set_string_value(std::string(config::unit_name(applied.unit)));
    if (applied.name != nullptr && !applied.name->empty()) limit["name"].set_string_value(*applied.name);
    if (applied.algorithm != config::algorithm::fixed_window)
      limit["algorithm"].set_string_value(std::string(config::algorithm_name(applied.algorithm)));
  }
  if (list.values().empty()) return;
  (*response.mutable_dynamic_metadata()->mutable_fields())["limited_by"].mutable_list_value()->Swap(&list);
}

}  // namespace sluice::ratelimit::service
