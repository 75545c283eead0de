#include "ratelimit/xds/sotw_session.hpp"

#include "core/strings.hpp"
#include "ratelimit/xds/resource_yaml.hpp"
#include "rls_conf.pb.h"

namespace sluice::ratelimit::xds {

sotw_session::request sotw_session::make(std::string_view nonce) const {
  request r;
  r.set_version_info(accepted_version_);
  r.set_type_url(std::string(rate_limit_config_type));
  r.set_response_nonce(std::string(nonce));
  auto& node = *r.mutable_node();
  node.set_id(node_.id);
  auto& fields = *node.mutable_metadata()->mutable_fields();
  for (const auto& [key, value] : node_.metadata) fields[key].set_string_value(value);
  return r;
}

sotw_session::request sotw_session::opening_request() const {
  return make("");
}

bool sotw_session::decode(const response& r, std::vector<config::config_file>& files, std::string& error) {
  files.clear();
  if (r.type_url() != rate_limit_config_type) {
    error = core::cat("the response is of type '", r.type_url(), "', not ", rate_limit_config_type);
    return false;
  }
  ::ratelimit::config::ratelimit::v3::RateLimitConfig config;
  for (int i = 0; i < r.resources_size(); ++i) {
    const auto& any = r.resources(i);
    if (any.type_url() != rate_limit_config_type) {
      error = core::cat("resource ", i, " is of type '", any.type_url(), "', not ", rate_limit_config_type);
      return false;
    }
    if (!config.ParseFromString(any.value())) {
      error = core::cat("resource ", i, " is not a valid RateLimitConfig message");
      return false;
    }
    config::config_file file;
    std::string why;
    if (!to_config_file(config, file, why)) {
      error = core::cat("resource ", i, " ('", config.name(), "') ", why);
      return false;
    }
    files.push_back(std::move(file));
  }
  return true;
}

sotw_session::request sotw_session::accept(const response& r) {
  accepted_version_ = r.version_info();
  return make(r.nonce());
}

sotw_session::request sotw_session::reject(const response& r, const std::string& error) const {
  auto out = make(r.nonce());
  out.mutable_error_detail()->set_message(error);
  return out;
}

}  // namespace sluice::ratelimit::xds
