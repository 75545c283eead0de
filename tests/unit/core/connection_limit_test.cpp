#include "core/connection_limit.hpp"

#include <doctest/doctest.h>

#include <sys/resource.h>

#include <thread>
#include <vector>

#include "core/health.hpp"
#include "core/open_files.hpp"

using sluice::core::connection_limit;

TEST_CASE("connection_limit: slots up to the maximum, then none until one is released") {
  connection_limit limit(2);
  auto a = limit.try_acquire();
  auto b = limit.try_acquire();
  CHECK(a);
  CHECK(b);
  CHECK_FALSE(limit.try_acquire());
  CHECK(limit.in_use() == 2);
  {
    auto moved = std::move(a);
    CHECK_FALSE(a);
    CHECK(limit.in_use() == 2);
  }
  CHECK(limit.in_use() == 1);
  auto c = limit.try_acquire();
  CHECK(c);
  c = connection_limit::slot();
  CHECK(limit.in_use() == 1);
}

TEST_CASE("connection_limit: threads never take more than the maximum") {
  connection_limit limit(1000);
  std::vector<std::vector<connection_limit::slot>> held(4);
  std::vector<std::thread> threads;
  for (auto& mine : held)
    threads.emplace_back([&limit, &mine] {
      for (int i = 0; i < 5000; ++i)
        if (auto s = limit.try_acquire()) mine.push_back(std::move(s));
    });
  for (auto& t : threads) t.join();
  std::size_t total = 0;
  for (auto& mine : held) total += mine.size();
  CHECK(total == 1000);
  CHECK(limit.in_use() == 1000);
  held.clear();
  CHECK(limit.in_use() == 0);
}

TEST_CASE("open files: the reserve and the default connection cap") {
  using namespace sluice::core;
  CHECK(reserved_descriptors(256) == 32);
  CHECK(default_max_connections(256) == 224);
  CHECK(default_max_connections(1024) == 896);
  CHECK(default_max_connections(1 << 20) == (1 << 20) - 1024);
  CHECK(default_max_connections(20) == 1);
}

TEST_CASE("open files: the soft limit is raised to the hard one") {
  auto limit = sluice::core::raise_open_file_limit();
  rlimit now{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &now) == 0);
  CHECK(limit.now == now.rlim_cur);
  CHECK(limit.now >= limit.before);
  if (now.rlim_max != RLIM_INFINITY) CHECK(now.rlim_cur == now.rlim_max);
}

TEST_CASE("health: a component made of parts is unhealthy while any part fails") {
  sluice::core::health h;
  auto listener = h.add_component("gRPC listener", true);
  std::vector<bool> heard;
  h.on_change([&heard](bool healthy) { heard.push_back(healthy); });
  h.part_failed(listener);
  h.part_failed(listener);
  CHECK_FALSE(h.healthy());
  h.part_recovered(listener);
  CHECK_FALSE(h.healthy());
  h.part_recovered(listener);
  CHECK(h.healthy());
  CHECK(heard == std::vector<bool>{true, false, true});
}
