#include "ratelimit/xds/resource_yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdint>

namespace sluice::ratelimit::xds {

namespace {

namespace rls_conf = ::ratelimit::config::ratelimit::v3;

void quoted(YAML::Emitter& out, const std::string& text) {
  out << YAML::DoubleQuoted << text;
}

void key(YAML::Emitter& out, const char* name) {
  out << YAML::Key << name << YAML::Value;
}

void emit_struct(YAML::Emitter& out, const google::protobuf::Struct& s);

void emit_value(YAML::Emitter& out, const google::protobuf::Value& v) {
  using kind = google::protobuf::Value::KindCase;
  switch (v.kind_case()) {
    case kind::kNumberValue: {
      const double n = v.number_value();
      // Whole numbers as integers (a YAML float such as 3.0 reads back the same, but reads worse in /rlconfig
      // and logs); others with every digit a double needs.
      if (std::isfinite(n) && std::trunc(n) == n && std::fabs(n) < 9007199254740992.0) {
        out << static_cast<std::int64_t>(n);
      } else {
        out << YAML::Precision(17) << n;
      }
      return;
    }
    case kind::kStringValue:
      return quoted(out, v.string_value());
    case kind::kBoolValue:
      out << v.bool_value();
      return;
    case kind::kStructValue:
      return emit_struct(out, v.struct_value());
    case kind::kListValue:
      out << YAML::BeginSeq;
      for (const auto& element : v.list_value().values()) emit_value(out, element);
      out << YAML::EndSeq;
      return;
    case kind::kNullValue:
    case kind::KIND_NOT_SET:
      out << YAML::Null;
      return;
  }
}

void emit_struct(YAML::Emitter& out, const google::protobuf::Struct& s) {
  out << YAML::BeginMap;
  for (const auto& [name, value] : s.fields()) {
    out << YAML::Key;
    quoted(out, name);
    out << YAML::Value;
    emit_value(out, value);
  }
  out << YAML::EndMap;
}

void emit_policy(YAML::Emitter& out, const rls_conf::RateLimitPolicy& p) {
  out << YAML::BeginMap;
  key(out, "unit");
  out << rls_conf::RateLimitUnit_Name(p.unit());
  key(out, "requests_per_unit");
  out << p.requests_per_unit();
  key(out, "unlimited");
  out << p.unlimited();
  key(out, "name");
  quoted(out, p.name());
  if (!p.replaces().empty()) {
    key(out, "replaces");
    out << YAML::BeginSeq;
    for (const auto& r : p.replaces()) {
      out << YAML::BeginMap;
      key(out, "name");
      quoted(out, r.name());
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
}

void emit_descriptors(YAML::Emitter& out,
                      const google::protobuf::RepeatedPtrField<rls_conf::RateLimitDescriptor>& list);

void emit_descriptor(YAML::Emitter& out, const rls_conf::RateLimitDescriptor& d) {
  out << YAML::BeginMap;
  key(out, "key");
  quoted(out, d.key());
  key(out, "value");
  quoted(out, d.value());
  if (d.has_rate_limit()) {
    key(out, "rate_limit");
    emit_policy(out, d.rate_limit());
  }
  key(out, "shadow_mode");
  out << d.shadow_mode();
  key(out, "detailed_metric");
  out << d.detailed_metric();
  key(out, "quota_mode");
  out << d.quota_mode();
  if (d.has_metadata()) {
    key(out, "metadata");
    emit_struct(out, d.metadata());
  }
  if (!d.descriptors().empty()) {
    key(out, "descriptors");
    emit_descriptors(out, d.descriptors());
  }
  out << YAML::EndMap;
}

void emit_descriptors(YAML::Emitter& out,
                      const google::protobuf::RepeatedPtrField<rls_conf::RateLimitDescriptor>& list) {
  out << YAML::BeginSeq;
  for (const auto& d : list) emit_descriptor(out, d);
  out << YAML::EndSeq;
}

}  // namespace

bool to_config_file(const rls_conf::RateLimitConfig& resource, config::config_file& file,
                    std::string& error) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  key(out, "domain");
  quoted(out, resource.domain());
  key(out, "descriptors");
  emit_descriptors(out, resource.descriptors());
  out << YAML::EndMap;
  if (!out.good()) {
    error = "cannot be written as rules: " + out.GetLastError();
    return false;
  }
  file = {resource.name(), std::string(out.c_str(), out.size())};
  return true;
}

}  // namespace sluice::ratelimit::xds
