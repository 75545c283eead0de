#include "rlqs_setup.hpp"

namespace sluice {

std::unique_ptr<ratelimit::rlqs::demand_exchange> make_demand_exchange(const ratelimit::module_settings&,
                                                                       std::size_t workers,
                                                                       boost::asio::io_context&,
                                                                       stats::store&) {
  return std::make_unique<ratelimit::rlqs::in_process_exchange>(workers);
}

}  // namespace sluice
