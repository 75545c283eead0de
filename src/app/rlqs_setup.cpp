#include "rlqs_setup.hpp"

#include "backend_setup.hpp"
#include "core/log.hpp"
#include "ratelimit/backends/redis/rlqs_exchange.hpp"

namespace sluice {

std::unique_ptr<ratelimit::rlqs::demand_exchange> make_demand_exchange(const ratelimit::module_settings& rl,
                                                                       std::size_t workers,
                                                                       boost::asio::io_context& control) {
  if (rl.backend_type == "redis") {
    // One connection of its own, on the control thread: a few commands per bucket per second.
    auto settings = rl.redis.main;
    settings.pool_size = 1;
    return std::make_unique<ratelimit::backends::redis::rlqs_exchange>(
        workers, make_store(settings, control, 0, 1), rl.limiter.cache_key_prefix, control.get_executor(),
        std::chrono::seconds(1));
  }
  if (rl.backend_type == "memcache") {
    core::log_info("RLQS: with BACKEND_TYPE=memcache each replica shares budgets among its own clients only");
  }
  return std::make_unique<ratelimit::rlqs::in_process_exchange>(workers);
}

}  // namespace sluice
