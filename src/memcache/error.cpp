#include "memcache/error.hpp"

#include <string>

namespace sluice::memcache {

namespace {

class memcache_category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "memcache"; }

  std::string message(int code) const override {
    switch (static_cast<error>(code)) {
      case error::protocol_error:
        return "memcached protocol error";
      case error::connect_timeout:
        return "memcached connect timed out";
      case error::request_timeout:
        return "memcached request timed out";
      case error::not_connected:
        return "Not connected to memcached";
      case error::connection_lost:
        return "memcached connection lost before the reply";
      case error::shutting_down:
        return "memcached client is shutting down";
      case error::no_servers:
        return "no memcached servers are configured";
    }
    return "Unknown memcached error";
  }
};

}  // namespace

const boost::system::error_category& category() {
  static const memcache_category instance;
  return instance;
}

}  // namespace sluice::memcache
