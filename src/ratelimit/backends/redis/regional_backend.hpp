#pragma once
// Several regions (docs/guides/regions.md): worker i's backend over its Redis backend (direct or batched).
// Decisions stay local: each op goes to this region's Redis as before, with its limit lowered by what the
// other regions hold of its key (the last remote_view), so that the store's own verdicts (a sliding window's
// admission, a concurrency slot, an all-or-nothing batch) see the global count; and each result gets that
// total added back, so that the limiter judges, shows `remaining` and counts its stats against the rule's
// limit as if one Redis held every region's hits. A key the view lacks counts nothing remote yet and is
// listed for the reader's next round. GCRA never reaches it: rules with it are refused at load.

#include <boost/unordered/unordered_flat_map.hpp>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ratelimit/backends/redis/remote_view.hpp"
#include "ratelimit/limiter/backend.hpp"

namespace sluice::ratelimit::backends::redis {

class regional_backend final : public limiter::backend {
 public:
  using new_keys = std::unordered_map<std::string, tracked_key, transparent_hash, std::equal_to<>>;

  // `per_second_apart`: REDIS_PERSECOND's own Redis takes per-second limits, which stay regional (its keys
  // are not in the replicas the reader reads). `cold`: REDIS_REMOTE_COLD_INTERVAL is set, so the counters'
  // own counts are reported to the reader.
  regional_backend(limiter::backend& inner, bool per_second_apart, bool cold = false);
  ~regional_backend() override;
  regional_backend(const regional_backend&) = delete;
  regional_backend& operator=(const regional_backend&) = delete;

  // On this worker's thread: the view from now on (its key -> slot changes applied).
  void set_view(remote_view_ptr view);
  // On this worker's thread: the keys used since the last call that the view lacked.
  new_keys take_new_keys() { return std::exchange(new_keys_, {}); }

  limiter::trace_description describe_for_trace(std::span<const limiter::counter_op> ops) const override {
    return inner_.describe_for_trace(ops);
  }
  void increment(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                 limiter::completion& done, limiter::batch_mode mode) override;
  void get(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
           limiter::completion& done) override;
  // The counts shown (explain, the counters API) are the global ones: this region's with the others' added.
  void inspect(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
               limiter::completion& done) override;
  // This region's keys only: a remote region's are its own to change.
  void overwrite(std::span<const limiter::counter_op> ops, limiter::completion& done) override {
    inner_.overwrite(ops, done);
  }

  // What the other regions hold of op's key (a sliding window: its current count and its previous one,
  // weighted as the window slides), or 0; lists the key when the view lacks it. `slot`: the key's slot, when
  // the view has it.
  std::uint64_t remote_total(const limiter::counter_op& op, std::uint32_t* slot = nullptr);

 private:
  struct call;
  // `key`'s total in the view (op's key, or with `previous` its sliding window's previous key); its slot in
  // `slot` when the view has it.
  std::uint64_t lookup(std::string_view key, const limiter::counter_op& op, bool previous,
                       std::uint32_t* slot = nullptr);
  // REDIS_REMOTE_COLD_INTERVAL: this region's count of `key` (in `slot`, or not in the view yet), as a result
  // showed it: into the view's local_seen, or the key's entry for the reader.
  void report_local(std::string_view key, std::uint32_t slot, std::uint64_t count, std::uint64_t limit);
  // Runs inner's operation with each op's limit lowered by its remote total, and adds the totals to the
  // results when it completes.
  template <typename Run>
  void with_totals(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                   limiter::completion& done, Run run, bool inspecting = false);
  call* acquire();
  void release(call* c);

  limiter::backend& inner_;
  bool per_second_apart_;
  bool cold_;
  remote_view_ptr view_;
  // As the views say. Its keys point into the views' shared keys: the reader's keep them alive while they
  // are tracked, and the view that drops one keeps it until this map has dropped it too (a flat map of
  // string_views: a million keys cost each worker about 40 MB less than with a node and a string per key).
  boost::unordered_flat_map<std::string_view, std::uint32_t, transparent_hash, std::equal_to<>> slots_;
  new_keys new_keys_;
  std::vector<std::unique_ptr<call>> free_;
};

}  // namespace sluice::ratelimit::backends::redis
