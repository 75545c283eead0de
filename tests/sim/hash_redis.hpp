#pragma once
// The Redis the RLQS replicas share their demand through, in virtual time: the hash commands rlqs_exchange
// sends (HSET, PEXPIRE, HGETALL, HDEL), each request applied and answered a round trip after it was sent,
// in the order sent, unless Redis is `down` then (the request fails, not applied). Keys never expire: the
// exchange judges its fields by the dates they carry, and a run is shorter than the TTL it sets only in
// virtual time.

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "../support/resp_commands.hpp"
#include "redis/error.hpp"
#include "redis/store.hpp"

namespace sluice::sim::rlqs_sim {

class hash_redis {
 public:
  using hash = std::map<std::string, std::string, std::less<>>;
  std::map<std::string, hash, std::less<>> keys;
  bool down = false;  // an outage: every request fails

  // Runs a request's commands: their replies.
  std::vector<redis::value> run(const test::command_list& commands) {
    std::vector<redis::value> replies;
    for (const auto& c : commands) {
      if (c[0] == "HSET" && c.size() == 4) {
        const bool added = keys[c[1]].insert_or_assign(c[2], c[3]).second;
        replies.push_back(test::integer(added ? 1 : 0));
      } else if (c[0] == "PEXPIRE" && c.size() == 3) {
        replies.push_back(test::integer(keys.contains(c[1]) ? 1 : 0));
      } else if (c[0] == "HDEL" && c.size() == 3) {
        auto it = keys.find(c[1]);
        const bool removed = it != keys.end() && it->second.erase(c[2]) == 1;
        if (it != keys.end() && it->second.empty()) keys.erase(it);
        replies.push_back(test::integer(removed ? 1 : 0));
      } else if (c[0] == "HGETALL" && c.size() == 2) {
        redis::value all;
        all.type = redis::value::kind::array;
        if (auto it = keys.find(c[1]); it != keys.end()) {
          for (const auto& [field, value] : it->second) {
            for (const auto* text : {&field, &value}) {
              auto& v = all.elements.emplace_back();
              v.type = redis::value::kind::bulk_string;
              v.text = *text;
            }
          }
        }
        replies.push_back(std::move(all));
      } else {
        throw std::runtime_error("the simulator's Redis does not run " + c[0]);
      }
    }
    return replies;
  }
};

// One replica's connection: `later(delay, f)` runs f a round trip on, in virtual time.
class hash_link final : public redis::store {
 public:
  using scheduler = std::function<void(std::function<void()>)>;
  hash_link(hash_redis& server, scheduler later) : server_(server), later_(std::move(later)) {}

  void start(observer) override {}
  void stop() override {}
  void exec(std::shared_ptr<redis::pending_request> request, std::string_view) override {
    later_([this, request] {
      if (server_.down) {
        if (request->done) request->done(redis::make_error_code(redis::error::connection_lost), {});
        return;
      }
      auto replies = server_.run(test::commands_of(request->payload));
      if (request->done) request->done({}, std::move(replies));
    });
  }
  bool one_key_per_request() const override { return false; }
  bool up() const override { return !server_.down; }
  std::string describe(boost::system::error_code ec) const override { return ec.message(); }
  std::string last_error() const override { return {}; }
  redis::connection_stats stats() const override { return {}; }

 private:
  hash_redis& server_;
  scheduler later_;
};

}  // namespace sluice::sim::rlqs_sim
