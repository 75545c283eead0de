#include "redis/error.hpp"

#include <string>

namespace sluice::redis {

namespace {

class redis_category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "redis"; }

  std::string message(int code) const override {
    switch (static_cast<error>(code)) {
      case error::protocol_error:
        return "Redis protocol error";
      case error::connect_timeout:
        return "Redis connect timed out";
      case error::request_timeout:
        return "Redis request timed out";
      case error::not_connected:
        return "Not connected to Redis";
      case error::connection_lost:
        return "Redis connection lost before the reply";
      case error::auth_failed:
        return "Redis authentication failed";
      case error::shutting_down:
        return "Redis client is shutting down";
    }
    return "Unknown Redis error";
  }
};

}  // namespace

const boost::system::error_category& category() {
  static const redis_category instance;
  return instance;
}

bool may_have_run(boost::system::error_code ec) {
  return !(ec == error::not_connected || ec == error::connect_timeout || ec == error::auth_failed);
}

}  // namespace sluice::redis
