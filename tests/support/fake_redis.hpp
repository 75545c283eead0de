#pragma once
// A fake Redis for unit tests of the Redis backends: a redis::store that runs the counter commands they send
// (INCRBY, EXPIRE, GET, MGET, DECRBY, and the refund scripts' EVAL) on a map, answering at once, when the
// test says (hold), or failing every request (down).

#include <boost/system/errc.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "redis/error.hpp"
#include "redis/store.hpp"
#include "resp_commands.hpp"

namespace sluice::test {

class fake_redis final : public redis::store {
 public:
  struct entry {
    std::int64_t value = 0;
    std::int64_t ttl = -1;
    bool garbage = false;  // holds a string that is not a number
  };
  std::map<std::string, entry, std::less<>> data;
  std::map<std::string, std::size_t, std::less<>> calls;  // per command name
  std::vector<std::shared_ptr<redis::pending_request>> held;
  std::vector<std::vector<std::vector<std::string>>> requests;  // every request's commands
  bool hold = false;                                            // keep requests until answer_held()
  bool down = false;                                            // fail every request at once
  bool cluster = false;                                         // one_key_per_request
  std::string refuse_writes;  // when set, the error reply to every INCRBY (e.g. READONLY ...)

  void start(observer) override {}
  void stop() override {}
  void exec(std::shared_ptr<redis::pending_request> request, std::string_view) override {
    requests.push_back(commands_of(request->payload));
    if (down) return request->done(make_error_code(redis::error::not_connected), {});
    if (hold) return held.push_back(std::move(request));
    answer(*request, requests.back());
  }
  bool one_key_per_request() const override { return cluster; }
  bool up() const override { return !down; }
  std::string describe(boost::system::error_code) const override { return "connection refused"; }
  std::string last_error() const override { return {}; }
  redis::connection_stats stats() const override { return {}; }

  // How held requests end: answered; failed unwritten (no connection: Redis never ran them); or failed with
  // the connection lost before their replies, Redis having run them or not (the client cannot tell which).
  enum class held_end { answered, never_written, lost_before_run, lost_after_run };
  // Ends the held requests in order.
  void answer_held(held_end how = held_end::answered) {
    auto list = std::move(held);
    held.clear();
    for (auto& r : list) {
      if (how == held_end::answered) {
        answer(*r, commands_of(r->payload));
        continue;
      }
      auto done = std::move(r->done);
      r->done = [](boost::system::error_code, std::vector<redis::value>&&) {};
      if (how == held_end::lost_after_run) answer(*r, commands_of(r->payload));
      done(make_error_code(how == held_end::never_written ? redis::error::not_connected
                                                          : redis::error::connection_lost),
           {});
    }
  }
  std::int64_t value(std::string_view key) const {
    auto it = data.find(key);
    return it == data.end() ? 0 : it->second.value;
  }
  std::size_t count(std::string_view command) const {
    auto it = calls.find(command);
    return it == calls.end() ? 0 : it->second;
  }

 private:
  redis::value get(const std::string& key) const {
    redis::value v;
    auto it = data.find(key);
    if (it == data.end()) return v;
    v.type = redis::value::kind::bulk_string;
    v.text = std::to_string(it->second.value);
    return v;
  }
  void answer(redis::pending_request& r, const std::vector<std::vector<std::string>>& commands) {
    std::vector<redis::value> replies;
    for (const auto& c : commands) {
      ++calls[c[0]];
      if (c[0] == "INCRBY" && (!refuse_writes.empty() || data[c[1]].garbage)) {
        redis::value e;
        e.type = redis::value::kind::error;
        e.text = refuse_writes.empty() ? "ERR value is not an integer or out of range" : refuse_writes;
        replies.push_back(std::move(e));
      } else if (c[0] == "INCRBY") {
        replies.push_back(integer(data[c[1]].value += to_int(c[2])));
      } else if (c[0] == "DECRBY") {
        replies.push_back(integer(data[c[1]].value -= to_int(c[2])));
      } else if (c[0] == "EXPIRE") {
        data[c[1]].ttl = to_int(c[2]);
        replies.push_back(integer(1));
      } else if (c[0] == "PING") {
        redis::value pong;
        pong.type = redis::value::kind::simple_string;
        pong.text = "PONG";
        replies.push_back(std::move(pong));
      } else if (c[0] == "GET") {
        replies.push_back(get(c[1]));
      } else if (c[0] == "MGET") {
        redis::value array;
        array.type = redis::value::kind::array;
        for (std::size_t i = 1; i < c.size(); ++i) array.elements.push_back(get(c[i]));
        replies.push_back(std::move(array));
      } else if (c[0] == "EVAL") {
        // The refund script, EVAL <script> 1 <key> <amount>; or the unseen refund script, with <seen> after.
        auto it = data.find(c[3]);
        if (it == data.end() || it->second.value < 0) {
          replies.push_back(integer(0));
        } else {
          const std::int64_t above = c.size() > 5 ? it->second.value - to_int(c[5]) : it->second.value;
          it->second.value -= std::max<std::int64_t>(0, std::min(above, to_int(c[4])));
          replies.push_back(integer(it->second.value));
        }
      } else {
        redis::value e;
        e.type = redis::value::kind::error;
        e.text = "ERR unknown command";
        replies.push_back(std::move(e));
      }
    }
    r.done({}, std::move(replies));
  }
};

}  // namespace sluice::test
