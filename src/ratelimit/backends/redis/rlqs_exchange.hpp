#pragma once
// The quota service's demand exchange across Sluice replicas that share a Redis (single, sentinel or
// cluster): every period each replica writes its clients' demand per bucket into one hash per bucket
// (<CACHE_KEY_PREFIX>rlqs:<bucket>, a field per replica: "<unix ms>|<demand>,<demand>,..."), refreshes the
// hash's expiry, and reads the whole hash back; fields older than three periods are ignored (a replica that
// stopped). The workers plan with their own process's demand (always current) plus the other replicas'
// (one period old). When Redis cannot be reached for three periods, each replica plans with 1/N of every
// budget, N being the replicas it saw last (log: once when it happens, once when it ends). Fields are dated
// by each replica's own clock: replicas' clocks must agree within a period or two (NTP); fields older than
// ten periods are deleted.

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.hpp"
#include "ratelimit/rlqs/demand_exchange.hpp"
#include "redis/resp.hpp"
#include "redis/store.hpp"

namespace sluice::ratelimit::backends::redis {

class rlqs_exchange final : public rlqs::demand_exchange {
 public:
  // `clock` dates the fields (Unix time); `replica`: this replica's field name (by default host, pid and a
  // random part).
  rlqs_exchange(std::size_t workers, std::unique_ptr<sluice::redis::store> store, std::string key_prefix,
                boost::asio::any_io_executor control, std::chrono::milliseconds period,
                const core::clock& clock, std::string replica = {});
  ~rlqs_exchange() override;

  // Runs sync() every period on the control executor.
  void start() override;
  void stop() override;
  // One round now: this replica's demand written, the others' read (the simulator calls it in virtual time).
  void sync();

  void publish(std::size_t worker, rlqs::demand_map needs) override {
    local_.publish(worker, std::move(needs));
  }
  void collect(const std::string& bucket, std::vector<double>& out, std::size_t except_worker) const override;
  double budget_fraction() const override { return fraction_.load(std::memory_order_relaxed); }

  // "<unix ms>|d,d,..." and back (exposed for tests).
  static std::string encode(std::int64_t unix_ms, const std::vector<double>& demands);
  static bool decode(std::string_view text, std::int64_t& unix_ms, std::vector<double>& demands);

 private:
  struct round;
  // One request of a round: its bucket ("" for a stale field's deletion), the key it is about, its commands.
  struct outgoing {
    std::string bucket;
    std::string key;
    sluice::redis::request request;
  };
  void schedule();
  std::int64_t unix_ms() const { return clock_.now_micros() / 1000; }
  std::vector<outgoing> requests_for(const rlqs::demand_map& mine, std::int64_t now_ms);
  void send(std::vector<outgoing> requests, const std::shared_ptr<round>& r);
  void on_reply(round& r, const std::string& bucket, boost::system::error_code ec,
                const std::vector<sluice::redis::value>& replies);
  void finish(round& r);
  std::string key_of(const std::string& bucket) const { return prefix_ + "rlqs:" + bucket; }

  rlqs::in_process_exchange local_;
  std::unique_ptr<sluice::redis::store> store_;
  std::string prefix_;
  std::string replica_;  // this process's field name: host, pid and a random part
  std::chrono::milliseconds period_;
  const core::clock& clock_;
  boost::asio::steady_timer timer_;
  mutable std::mutex mutex_;
  rlqs::demand_map remote_;                                 // the other replicas' demands, per bucket
  std::set<std::string> published_;                         // buckets this replica wrote last round
  std::vector<std::pair<std::string, std::string>> stale_;  // (key, field) of stopped replicas, to delete
  std::shared_ptr<round> in_flight_;                        // one round at a time
  std::int64_t last_success_ms_ = 0;
  std::size_t replicas_seen_ = 1;  // this one included
  bool degraded_ = false;
  bool stopped_ = false;
  bool connected_ = false;  // the store is started on the first round with something to share
  std::atomic<double> fraction_{1.0};
};

}  // namespace sluice::ratelimit::backends::redis
