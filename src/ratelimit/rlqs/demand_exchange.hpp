#pragma once
// How the demand for a bucket becomes known fleet-wide: every worker publishes, once per period, what each of
// its clients needs per bucket, and reads every client's need (its own included) back to plan the shares.
// One process: in_process_exchange (below). Several replicas on Redis: backends/redis/rlqs_exchange, which
// adds the other replicas' needs. The backend module picks one (backends/module.hpp). Thread-safe.

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace sluice::ratelimit::rlqs {

// Per bucket (its canonical key, bucket_key.hpp): the needs of one publisher's clients, requests per second.
using demand_map = std::unordered_map<std::string, std::vector<double>>;

class demand_exchange {
 public:
  virtual ~demand_exchange() = default;
  // On the control thread: exchanges that talk to other replicas start and stop doing so.
  virtual void start() {}
  virtual void stop() {}
  // Replaces what `worker` published before.
  virtual void publish(std::size_t worker, demand_map needs) = 0;
  // Appends every client's need for `bucket` (all workers, and other replicas where shared) to `out`, but
  // for `except_worker`'s (the caller, who adds its own, current ones; `no_worker`: every worker's).
  static constexpr std::size_t no_worker = static_cast<std::size_t>(-1);
  virtual void collect(const std::string& bucket, std::vector<double>& out,
                       std::size_t except_worker) const = 0;
  // The fraction of a budget this process may plan with: 1 when the fleet's demand is known; less when
  // replicas cannot see each other (then each keeps to a conservative part of it).
  virtual double budget_fraction() const { return 1.0; }
};

// This process's workers only: BACKEND_TYPE=memory (one replica) and memcached.
class in_process_exchange : public demand_exchange {
 public:
  explicit in_process_exchange(std::size_t workers) : published_(workers) {}
  void publish(std::size_t worker, demand_map needs) override;
  void collect(const std::string& bucket, std::vector<double>& out, std::size_t except_worker) const override;
  // Every worker's needs summed per bucket into `out` (bucket → needs), for sharing with other replicas.
  void snapshot(demand_map& out) const;

 private:
  mutable std::mutex mutex_;
  std::vector<demand_map> published_;  // by worker
};

}  // namespace sluice::ratelimit::rlqs
