#pragma once
// What an xDS client keeps across its ADS streams (reference §9), without I/O: the request that opens each
// stream, the rule files a response carries, and the ACK or NACK that answers it. A version that was NACKed
// is never sent as accepted, not even on a new stream (upstream re-sends the last nonce it received and takes
// its version for accepted after a reconnect).

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "discovery.pb.h"
#include "ratelimit/config/yaml_loader.hpp"

namespace sluice::ratelimit::xds {

inline constexpr std::string_view rate_limit_config_type =
    "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

// Who the client says it is: CONFIG_GRPC_XDS_NODE_ID and CONFIG_GRPC_XDS_NODE_METADATA (string values).
struct node_identity {
  std::string id = "default";
  std::vector<std::pair<std::string, std::string>> metadata;
};

class sotw_session {
 public:
  using request = envoy::service::discovery::v3::DiscoveryRequest;
  using response = envoy::service::discovery::v3::DiscoveryResponse;

  explicit sotw_session(node_identity node) : node_(std::move(node)) {}

  // The first request of a stream: every resource of the type (wildcard), the version accepted last, no nonce
  // (a nonce belongs to the stream that sent it).
  request opening_request() const;
  // The rule files of a response, in its order, each named by the resource's `name`; false with `error` when
  // the response is of another type or a resource is not a RateLimitConfig.
  static bool decode(const response& r, std::vector<config::config_file>& files, std::string& error);
  // ACK: the response's version is now the accepted one.
  request accept(const response& r);
  // NACK: the version accepted last, the response's nonce, and why.
  request reject(const response& r, const std::string& error) const;
  const std::string& accepted_version() const { return accepted_version_; }

 private:
  request make(std::string_view nonce) const;

  node_identity node_;
  std::string accepted_version_;
};

}  // namespace sluice::ratelimit::xds
