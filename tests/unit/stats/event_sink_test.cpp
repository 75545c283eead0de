#include <doctest/doctest.h>

#include <map>
#include <thread>

#include "stats/event_sink.hpp"

using namespace sluice::stats;

namespace {

// Records what a flush hands the sink.
class recording_sink final : public event_sink {
 public:
  using event_sink::event_sink;
  std::map<std::string, std::uint64_t> counters;
  std::map<std::string, std::int64_t> gauges;
  std::vector<std::tuple<std::string, double, double>> timers;
  int flushes = 0;

  void clear() {
    counters.clear();
    gauges.clear();
    timers.clear();
  }

 private:
  void on_counter(const std::string& name, std::uint64_t delta) override { counters[name] = delta; }
  void on_gauge(const std::string& name, std::int64_t value) override { gauges[name] = value; }
  void on_timer(const std::string& name, double ms, double rate) override {
    timers.emplace_back(name, ms, rate);
  }
  void on_flush_end() override { ++flushes; }
};

}  // namespace

TEST_CASE("counters flush their delta since the last flush, and only when it is not zero") {
  store s;
  recording_sink k;
  auto& a = s.get_counter("a");
  auto& b = s.get_counter("b");
  s.get_counter("never");
  a.add(5);
  b.inc();
  k.flush(s);
  CHECK(k.counters == std::map<std::string, std::uint64_t>{{"a", 5}, {"b", 1}});
  k.clear();
  a.add(2);
  k.flush(s);
  CHECK(k.counters == std::map<std::string, std::uint64_t>{{"a", 2}});
  k.clear();
  k.flush(s);
  CHECK(k.counters.empty());
  CHECK(k.flushes == 3);
}

TEST_CASE("gauges always flush their current value") {
  store s;
  recording_sink k;
  s.get_gauge("g").set(7);
  s.get_gauge("zero");
  k.flush(s);
  CHECK(k.gauges == std::map<std::string, std::int64_t>{{"g", 7}, {"zero", 0}});
  k.clear();
  k.flush(s);
  CHECK(k.gauges == std::map<std::string, std::int64_t>{{"g", 7}, {"zero", 0}});
}

TEST_CASE("timers: every observation of the interval, once") {
  store s;
  recording_sink k;
  s.set_timer_observer(&k);
  auto& t = s.get_timer("t");
  t.record(1.5);
  t.record(3);
  k.flush(s);
  CHECK(k.timers == std::vector<std::tuple<std::string, double, double>>{{"t", 1.5, 1.0}, {"t", 3, 1.0}});
  k.clear();
  k.flush(s);
  CHECK(k.timers.empty());
  s.set_timer_observer(nullptr);
}

TEST_CASE("timers past the buffer's capacity are sampled, with a rate that keeps the count right") {
  store s;
  recording_sink k(100);  // per shard
  s.set_timer_observer(&k);
  auto& busy = s.get_timer("busy");
  auto& quiet = s.get_timer("quiet");
  // Two threads, so two shards of 100.
  auto record = [&] {
    for (int i = 0; i < 1000; ++i) busy.record(i);
  };
  std::thread other(record);
  record();
  other.join();
  std::thread([&] { quiet.record(1); }).join();  // a shard of its own, never full
  k.flush(s);
  std::map<std::string, double> counted;
  std::map<std::string, int> kept;
  for (const auto& [name, ms, rate] : k.timers) {
    CHECK(rate <= 1.0);
    counted[name] += 1.0 / rate;
    ++kept[name];
  }
  CHECK(kept["busy"] == 200);
  CHECK(counted["busy"] == doctest::Approx(2000));
  CHECK(kept["quiet"] == 1);
  CHECK(counted["quiet"] == 1);

  // The next interval starts afresh.
  k.clear();
  busy.record(5);
  k.flush(s);
  CHECK(k.timers == std::vector<std::tuple<std::string, double, double>>{{"busy", 5, 1.0}});
  s.set_timer_observer(nullptr);
}

TEST_CASE("timer_buffer keeps a uniform sample once full") {
  store s;
  auto& t = s.get_timer("t");
  timer_buffer b(1000);
  for (int i = 0; i < 100'000; ++i) b.add(t, i);
  auto batch = b.take();
  CHECK(batch.sampled);
  REQUIRE(batch.kept.size() == 1000);
  double sum = 0;
  for (const auto& o : batch.kept) sum += o.milliseconds;
  // Mean of 0..99999 is ~50000; keeping only the first values would give ~500.
  CHECK(sum / 1000 == doctest::Approx(50'000).epsilon(0.1));
  CHECK_FALSE(b.take().sampled);
  CHECK(b.take().kept.empty());
}
