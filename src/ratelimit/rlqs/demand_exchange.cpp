#include "ratelimit/rlqs/demand_exchange.hpp"

namespace sluice::ratelimit::rlqs {

void in_process_exchange::publish(std::size_t worker, demand_map needs) {
  std::lock_guard lock(mutex_);
  if (worker < published_.size()) published_[worker] = std::move(needs);
}

void in_process_exchange::collect(const std::string& bucket, std::vector<double>& out,
                                  std::size_t except_worker) const {
  std::lock_guard lock(mutex_);
  for (std::size_t w = 0; w < published_.size(); ++w) {
    if (w == except_worker) continue;
    auto it = published_[w].find(bucket);
    if (it != published_[w].end()) out.insert(out.end(), it->second.begin(), it->second.end());
  }
}

void in_process_exchange::snapshot(demand_map& out) const {
  std::lock_guard lock(mutex_);
  for (const auto& worker : published_) {
    for (const auto& [bucket, needs] : worker) {
      auto& all = out[bucket];
      all.insert(all.end(), needs.begin(), needs.end());
    }
  }
}

}  // namespace sluice::ratelimit::rlqs
