#pragma once
// The decide_script calls of one worker's decisions, gathered over one turn of its io_context and sent as one
// EVALSHA per store — per slot on a cluster. A call's fixed cost in Redis is paid once per turn instead of
// once per decision, and a key several decisions share is read and written once. A group of independent GCRA
// ops whose keys no other op of the turn touches goes instead as BITFIELDs (gcra_command.hpp) in the same
// round trip (on a cluster, one op per request, beside the script's), with a PEXPIRE where gcra_expiry says
// one is due: a script costs Redis about twice as much per key as BITFIELD, and gains only on shared keys.
// Nothing waits for the batch: it goes out when the handlers queued before it have run (a post to the
// worker's executor).

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ratelimit/backends/redis/decide_script.hpp"
#include "ratelimit/backends/redis/gcra_expiry.hpp"
#include "redis/store.hpp"

namespace sluice::ratelimit::backends::redis {

class script_batcher {
 public:
  // A group's answer: the script's reply and where the group's part starts; or its BITFIELDs' replies, one
  // per op (their PEXPIREs, where due, are checked here).
  struct answer {
    const sluice::redis::value* script = nullptr;
    std::size_t at = 0;
    std::span<const sluice::redis::value> gcra;
  };
  // With the group's answer, or with the error that failed the call.
  using done_fn = std::function<void(const std::string* error, const answer& reply)>;

  script_batcher(boost::asio::any_io_executor ex, sluice::redis::store& store)
      : ex_(std::move(ex)), store_(store) {}
  script_batcher(const script_batcher&) = delete;
  script_batcher& operator=(const script_batcher&) = delete;

  // Queues a group; all of its keys hash to the slot of `routing_key`. The group's ops must stay valid until
  // `done` is called. On the worker's thread, as everything here: no lock.
  void add(const script_group& group, std::string_view routing_key, done_fn done);

 private:
  struct entry {
    script_group group;
    done_fn done;
  };
  struct call {
    std::string routing_key;
    std::vector<entry> entries;
  };

  // Where a group goes: in the script's call, as BITFIELDs in the same request, or (on a cluster) as a
  // request of its own.
  enum class route : std::uint8_t { script, with_script, own_request };

  // What a call's request carries: the BITFIELDs first, in entry order, then the script's one call, then the
  // PEXPIREs due.
  struct layout {
    std::vector<route> routes;                // each entry's
    std::vector<std::size_t> expiring;        // how many PEXPIREs each BITFIELD group sends
    std::size_t bitfields = 0;                // replies before the script's
    bool scripted = false;                    // the script is called
    std::vector<std::uint64_t> pexpire_keys;  // the PEXPIREs' keys' hashes
  };

  void flush();
  // How many ops of the call touch each key.
  static std::unordered_map<std::string_view, std::size_t> key_uses(const call& c, bool whole);
  // Sends the call; `whole` (after NOSCRIPT): the script itself, and every group through it.
  void send(std::shared_ptr<call> c, bool whole);
  // Encodes the call into `out` (but the groups that go as a request of their own, which it sends).
  layout encode(const std::shared_ptr<call>& c, bool whole, sluice::redis::request& out);
  // Hands each entry its replies, or the failure; a node that lost the script gets the call again, whole.
  void answered(const std::shared_ptr<call>& c, bool whole, const layout& sent, boost::system::error_code ec,
                std::vector<sluice::redis::value>& replies);
  // Sends the k-th group of `c` (one GCRA op) as its own BITFIELD request.
  void send_gcra(std::shared_ptr<call> c, std::size_t k);
  // PEXPIREs that failed, or may not have run: the keys' next decisions send them again.
  void forget(std::vector<std::uint64_t> key_hashes);

  boost::asio::any_io_executor ex_;
  sluice::redis::store& store_;
  std::unordered_map<std::uint32_t, std::shared_ptr<call>> calls_;  // by slot (0 off a cluster)
  bool flush_posted_ = false;
  gcra_expiry expiry_;
};

}  // namespace sluice::ratelimit::backends::redis
