#pragma once
// The decide_script calls of one worker's decisions, gathered over one turn of its io_context and sent as one
// EVALSHA per store — per slot on a cluster. A call's fixed cost in Redis is paid once per turn instead of
// once per decision, and a key several decisions share is read and written once. Nothing waits for the batch:
// it goes out when the handlers queued before it have run (a post to the worker's executor).

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ratelimit/backends/redis/decide_script.hpp"
#include "redis/store.hpp"

namespace sluice::ratelimit::backends::redis {

class script_batcher {
 public:
  // With the whole reply and where this group's part starts; or with the error that failed the call.
  using done_fn =
      std::function<void(const std::string* error, const sluice::redis::value* reply, std::size_t at)>;

  script_batcher(boost::asio::any_io_executor ex, sluice::redis::store& store)
      : ex_(std::move(ex)), store_(store) {}
  script_batcher(const script_batcher&) = delete;
  script_batcher& operator=(const script_batcher&) = delete;

  // Queues a group; all of its keys hash to the slot of `routing_key`. The group's ops must stay valid until
  // `done` is called. Any thread may call this.
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

  void flush();
  void send(std::shared_ptr<call> c, bool whole);

  boost::asio::any_io_executor ex_;
  sluice::redis::store& store_;
  std::mutex mutex_;
  std::unordered_map<std::uint32_t, std::shared_ptr<call>> calls_;  // by slot (0 off a cluster)
  bool flush_posted_ = false;
};

}  // namespace sluice::ratelimit::backends::redis
