#pragma once
// Part of the composition root: how the quota service learns the fleet's demand. BACKEND_TYPE=redis shares it
// with the other replicas through Redis; memory and memcache keep it to this process (memory is one replica
// by design; with memcached each replica plans with its own clients only — see README).

#include <boost/asio/io_context.hpp>
#include <memory>

#include "ratelimit/rlqs/demand_exchange.hpp"
#include "ratelimit/settings.hpp"
#include "stats/store.hpp"

namespace sluice {

std::unique_ptr<ratelimit::rlqs::demand_exchange> make_demand_exchange(const ratelimit::module_settings& rl,
                                                                       std::size_t workers,
                                                                       boost::asio::io_context& control,
                                                                       stats::store& stats);

}  // namespace sluice
