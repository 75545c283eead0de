#include "ratelimit/service/request_text.hpp"

#include "core/strings.hpp"
#include "tracing/proto_text.hpp"

namespace sluice::ratelimit::service {

namespace {

// The fields of a limit override, zeros left out (the request's writer and dynamic metadata print them).
void append_override(std::string& out, const RateLimitOverride& o) {
  if (o.requests_per_unit() != 0) core::append_to(out, "requests_per_unit:", o.requests_per_unit());
  if (o.unit() == 0) return;
  if (o.requests_per_unit() != 0) out.push_back(' ');
  out += "unit:";
  const auto& name = envoy::type::v3::RateLimitUnit_Name(o.unit());
  if (name.empty()) {
    core::append_to(out, static_cast<int>(o.unit()));
  } else {
    out += name;
  }
}

}  // namespace

std::string go_text(const RateLimitOverride& limit) {
  std::string out;
  append_override(out, limit);
  return out;
}

std::string go_text(const rls_request& r) {
  std::string out;
  auto field = [&out](std::string_view name) {
    if (!out.empty() && out.back() != '{') out.push_back(' ');
    out += name;
    out.push_back(':');
  };
  if (!r.domain().empty()) {
    field("domain");
    tracing::append_go_quoted(out, r.domain());
  }
  for (const auto& d : r.descriptors()) {
    field("descriptors");
    out.push_back('{');
    for (const auto& e : d.entries()) {
      field("entries");
      out.push_back('{');
      if (!e.key().empty()) {
        field("key");
        tracing::append_go_quoted(out, e.key());
      }
      if (!e.value().empty()) {
        field("value");
        tracing::append_go_quoted(out, e.value());
      }
      out.push_back('}');
    }
    if (d.has_limit()) {
      field("limit");
      out.push_back('{');
      append_override(out, d.limit());
      out.push_back('}');
    }
    if (d.has_hits_addend()) {
      field("hits_addend");
      out.push_back('{');
      if (d.hits_addend().value() != 0) {
        field("value");
        core::append_to(out, d.hits_addend().value());
      }
      out.push_back('}');
    }
    if (d.is_negative_hits()) {
      field("is_negative_hits");
      out += "true";
    }
    out.push_back('}');
  }
  if (r.hits_addend() != 0) {
    field("hits_addend");
    core::append_to(out, r.hits_addend());
  }
  return out;
}

}  // namespace sluice::ratelimit::service
