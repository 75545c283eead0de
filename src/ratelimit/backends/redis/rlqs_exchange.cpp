#include "ratelimit/backends/redis/rlqs_exchange.hpp"

#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <random>

#include "core/log.hpp"
#include "core/strings.hpp"
#include "redis/resp.hpp"

namespace sluice::ratelimit::backends::redis {

namespace rd = sluice::redis;

namespace {

std::string make_replica_id() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::random_device rd;
  return core::cat(host, "-", getpid(), "-", std::to_string(rd() % 1'000'000));
}

}  // namespace

// One exchange with Redis: a request per bucket; the other replicas' demands gathered as replies come in.
struct rlqs_exchange::round {
  std::size_t waiting = 0;
  bool failed = false;
  bool abandoned = false;  // given up on (no reply in time): replies that come later are dropped
  bool reads = false;      // it reads the hashes (not only deletes): it can count the replicas
  std::string error;
  std::int64_t started_ms = 0;
  rlqs::demand_map remote;
  std::set<std::string> replicas;
};

rlqs_exchange::rlqs_exchange(std::size_t workers, std::unique_ptr<rd::store> store, std::string key_prefix,
                             boost::asio::any_io_executor control, std::chrono::milliseconds period,
                             const core::clock& clock, std::string replica)
    : local_(workers),
      store_(std::move(store)),
      prefix_(std::move(key_prefix)),
      replica_(replica.empty() ? make_replica_id() : std::move(replica)),
      period_(period),
      clock_(clock),
      timer_(std::move(control)),
      last_success_ms_(unix_ms()) {}

rlqs_exchange::~rlqs_exchange() = default;

void rlqs_exchange::start() {
  last_success_ms_ = unix_ms();
  schedule();
}

void rlqs_exchange::stop() {
  stopped_ = true;
  timer_.cancel();
  if (connected_) store_->stop();
}

void rlqs_exchange::collect(const std::string& bucket, std::vector<double>& out,
                            std::size_t except_worker) const {
  local_.collect(bucket, out, except_worker);
  std::lock_guard lock(mutex_);
  auto it = remote_.find(bucket);
  if (it != remote_.end()) out.insert(out.end(), it->second.begin(), it->second.end());
}

std::string rlqs_exchange::encode(std::int64_t ms, const std::vector<double>& demands) {
  std::string out = std::to_string(ms);
  out += '|';
  char buf[32];
  for (std::size_t i = 0; i < demands.size(); ++i) {
    if (i > 0) out += ',';
    const int n = std::snprintf(buf, sizeof buf, "%.3f", demands[i]);
    out.append(buf, std::min(sizeof buf - 1, static_cast<std::size_t>(std::max(n, 0))));
  }
  return out;
}

bool rlqs_exchange::decode(std::string_view text, std::int64_t& ms, std::vector<double>& demands) {
  const auto bar = text.find('|');
  if (bar == std::string_view::npos) return false;
  const auto parsed = std::from_chars(text.data(), text.data() + bar, ms);
  if (parsed.ec != std::errc{} || parsed.ptr != text.data() + bar) return false;
  std::string_view rest = text.substr(bar + 1);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const auto item = rest.substr(0, comma);
    double d = 0;
    const auto r = std::from_chars(item.data(), item.data() + item.size(), d);
    if (r.ec != std::errc{} || r.ptr != item.data() + item.size() || !(d >= 0)) return false;
    demands.push_back(d);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return true;
}

void rlqs_exchange::schedule() {
  if (stopped_) return;
  timer_.expires_after(period_);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || stopped_) return;
    sync();
    schedule();
  });
}

void rlqs_exchange::sync() {
  if (in_flight_) {
    // Requests wait in the pipeline while Redis is away: a round without its replies after three periods
    // counts as failed.
    if (unix_ms() - in_flight_->started_ms < 3 * period_.count()) return;
    auto late = std::move(in_flight_);
    late->abandoned = true;
    late->failed = true;
    if (late->error.empty()) late->error = core::cat("no reply within ", 3 * period_.count(), " ms");
    finish(*late);
  }
  rlqs::demand_map mine;
  local_.snapshot(mine);
  auto r = std::make_shared<round>();
  r->started_ms = unix_ms();
  r->reads = !mine.empty();
  if (mine.empty() && published_.empty() && stale_.empty()) {
    last_success_ms_ = r->started_ms;  // nothing to share: Redis is not needed (nor connected to) yet
    return;
  }
  if (!connected_) {
    // The first quota stream: one connection of its own from now on (none for a fleet without quota streams,
    // so REDIS_POOL_SIZE stays the count of connections until then). Used from the next round, once up.
    connected_ = true;
    store_->start([] {});
    return;
  }
  if (!store_->up()) {
    r->failed = true;
    r->error = store_->last_error().empty() ? "not connected" : store_->last_error();
    return finish(*r);
  }
  send(requests_for(mine, r->started_ms), r);
}

std::vector<rlqs_exchange::outgoing> rlqs_exchange::requests_for(const rlqs::demand_map& mine,
                                                                 std::int64_t now_ms) {
  std::vector<outgoing> requests;
  for (const auto& bucket : published_) {
    if (mine.contains(bucket)) continue;
    auto& gone = requests.emplace_back(outgoing{bucket, key_of(bucket), {}});
    gone.request.push({"HDEL", gone.key, replica_});  // no client here any more: our demand leaves at once
  }
  for (auto& [key, field] : stale_) {
    auto& stale = requests.emplace_back(outgoing{{}, std::move(key), {}});
    stale.request.push({"HDEL", stale.key, field});  // a replica that stopped long ago: its field goes
  }
  stale_.clear();
  published_.clear();
  const auto ttl_ms = std::to_string(period_.count() * 10);
  for (const auto& [bucket, demands] : mine) {
    auto& out = requests.emplace_back(outgoing{bucket, key_of(bucket), {}});
    out.request.push({"HSET", out.key, replica_, encode(now_ms, demands)});
    out.request.push({"PEXPIRE", out.key, ttl_ms});
    out.request.push({"HGETALL", out.key});
    published_.insert(bucket);
  }
  return requests;
}

void rlqs_exchange::send(std::vector<outgoing> requests, const std::shared_ptr<round>& r) {
  if (requests.empty()) return finish(*r);
  in_flight_ = r;
  r->waiting = requests.size();
  for (auto& out : requests) {
    auto pending = std::make_shared<rd::pending_request>();
    pending->expected_replies = out.request.expected_replies();
    pending->payload = out.request.release_payload();
    pending->done = [this, r, bucket = out.bucket](boost::system::error_code ec,
                                                   std::vector<rd::value>&& replies) {
      on_reply(*r, bucket, ec, replies);
      if (--r->waiting == 0 && !r->abandoned) finish(*r);
    };
    store_->exec(std::move(pending), out.key);  // one key per request: a cluster routes each
  }
}

void rlqs_exchange::on_reply(round& r, const std::string& bucket, boost::system::error_code ec,
                             const std::vector<rd::value>& replies) {
  if (ec) {
    r.failed = true;
    r.error = store_->describe(ec);
    return;
  }
  if (replies.size() != 3 || replies[2].type != rd::value::kind::array) return;  // an HDEL
  const auto& fields = replies[2].elements;
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
    if (fields[i].text == replica_) continue;
    std::int64_t at = 0;
    std::vector<double> demands;
    const bool valid = decode(fields[i + 1].text, at, demands);
    if (!valid || at < r.started_ms - 10 * period_.count()) {
      stale_.emplace_back(key_of(bucket), fields[i].text);  // deleted with the next round
      continue;
    }
    if (at < r.started_ms - 3 * period_.count()) continue;  // a replica that stopped a moment ago
    r.replicas.insert(fields[i].text);
    auto& all = r.remote[bucket];
    all.insert(all.end(), demands.begin(), demands.end());
  }
}

void rlqs_exchange::finish(round& r) {
  in_flight_.reset();
  const auto now = unix_ms();
  if (!r.failed) {
    last_success_ms_ = now;
    if (r.reads) replicas_seen_ = r.replicas.size() + 1;  // a round of deletions only sees no replica
    {
      std::lock_guard lock(mutex_);
      remote_ = std::move(r.remote);
    }
    fraction_.store(1.0, std::memory_order_relaxed);
    if (degraded_) {
      degraded_ = false;
      core::log_warn("RLQS: Redis is reachable again; shares are planned from the fleet's demand");
    }
    return;
  }
  if (degraded_ || now - last_success_ms_ < 3 * period_.count() - period_.count() / 2) return;
  degraded_ = true;
  {
    std::lock_guard lock(mutex_);
    remote_.clear();
  }
  fraction_.store(1.0 / static_cast<double>(replicas_seen_), std::memory_order_relaxed);
  core::log_warn("RLQS: cannot reach Redis to share demand (", r.error, "); each replica plans with 1/",
                 replicas_seen_, " of every budget (", replicas_seen_, " replicas seen last) until it can");
}

}  // namespace sluice::ratelimit::backends::redis
