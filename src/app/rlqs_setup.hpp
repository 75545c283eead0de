#pragma once
// Part of the composition root: how the quota service learns the fleet's demand. BACKEND_TYPE=redis shares it
// with the other replicas through Redis (ratelimit/backends/redis/rlqs_exchange); memory (one replica by
// design) and memcache keep it to this process: with memcached each replica shares a budget among its own
// clients only, so N replicas together may admit up to N budgets (README).

#include <boost/asio/io_context.hpp>
#include <memory>

#include "ratelimit/rlqs/demand_exchange.hpp"
#include "ratelimit/settings.hpp"

namespace sluice {

std::unique_ptr<ratelimit::rlqs::demand_exchange> make_demand_exchange(const ratelimit::module_settings& rl,
                                                                       std::size_t workers,
                                                                       boost::asio::io_context& control);

}  // namespace sluice
