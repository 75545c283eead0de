// Real inotify on temporary directories; the io_context runs in the test thread unless a test says otherwise.

#include "core/file_watch.hpp"

#include <doctest/doctest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#include "../../support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using sluice::core::file_watch;
using clock_type = std::chrono::steady_clock;

struct temp_dir : sluice::testing::temp_dir {
  temp_dir() : sluice::testing::temp_dir("sluice-file-watch") {}
};

void write_file(const fs::path& p, const std::string& content = "x") {
  std::ofstream out(p);
  out << content;
  out.close();
  REQUIRE(out.good());
}

struct fixture {
  boost::asio::io_context ioc;
  std::chrono::milliseconds debounce{50};
  int calls = 0;
  clock_type::time_point last_call;
  // Runs inside on_change, after counting the call.
  std::function<void()> on_call;
  std::unique_ptr<file_watch> watch;

  void start(std::vector<file_watch::target> targets) {
    watch = std::make_unique<file_watch>(ioc.get_executor(), std::move(targets), debounce, [this] {
      ++calls;
      last_call = clock_type::now();
      if (on_call) on_call();
    });
    watch->start();
  }

  void run_for(std::chrono::milliseconds d) {
    ioc.restart();
    ioc.run_for(d);
  }

  // Runs the io_context until `done` holds or the timeout passes.
  template <typename Pred>
  void run_until(Pred done, std::chrono::milliseconds timeout) {
    const auto deadline = clock_type::now() + timeout;
    while (!done() && clock_type::now() < deadline) {
      ioc.restart();
      ioc.run_one_for(10ms);
    }
  }

  // Calls caused by `action`: waits for the first one, then long enough past the debounce for a second to
  // show.
  template <typename Action>
  int calls_after(Action action) {
    const int before = calls;
    action();
    run_until([&] { return calls > before; }, 2s);
    run_for(3 * debounce);
    return calls - before;
  }

  // For changes that must not count: a call would come within one debounce plus scheduling latency.
  template <typename Action>
  int calls_after_quiet_period(Action action) {
    const int before = calls;
    action();
    run_for(6 * debounce);
    return calls - before;
  }
};

// Builds parent/{old,new}/config and parent/current -> old.
void make_swappable_root(const fs::path& parent) {
  fs::create_directories(parent / "old" / "config");
  fs::create_directories(parent / "new" / "config");
  fs::create_directory_symlink("old", parent / "current");
}

// The atomic swap of `ln -s new tmp && mv -T tmp current`.
void swap_current_to(const fs::path& parent, const std::string& target) {
  fs::create_directory_symlink(target, parent / "tmp");
  fs::rename(parent / "tmp", parent / "current");
}

// Watches held by all inotify descriptors of this process (one `inotify wd:` line each in fdinfo).
int inotify_watch_count() {
  int count = 0;
  for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (fs::read_symlink(entry.path(), ec).string() != "anon_inode:inotify") continue;
    std::ifstream info("/proc/self/fdinfo/" + entry.path().filename().string());
    for (std::string line; std::getline(info, line);) count += line.starts_with("inotify wd:");
  }
  return count;
}

}  // namespace

TEST_CASE("file_watch: writing a file gives one call, after the debounce") {
  temp_dir dir;
  write_file(dir.path / "rules.yaml");
  fixture fx;
  fx.start({{dir.path.string(), std::nullopt}});

  CHECK(fx.calls_after_quiet_period([] {}) == 0);
  const auto written = clock_type::now();
  CHECK(fx.calls_after([&] { write_file(dir.path / "rules.yaml", "domain: a"); }) == 1);
  CHECK(fx.last_call - written >= fx.debounce);
}

TEST_CASE("file_watch: create, chmod, remove and moves in and out each give a call") {
  temp_dir dir;
  temp_dir outside;
  write_file(dir.path / "existing.yaml");
  write_file(outside.path / "incoming.yaml");
  fixture fx;
  fx.start({{dir.path.string(), std::nullopt}});

  SUBCASE("create") {
    CHECK(fx.calls_after([&] { write_file(dir.path / "new.yaml"); }) == 1);
  }
  SUBCASE("chmod") {
    CHECK(fx.calls_after([&] { REQUIRE(::chmod((dir.path / "existing.yaml").c_str(), 0600) == 0); }) == 1);
  }
  SUBCASE("remove") {
    CHECK(fx.calls_after([&] { fs::remove(dir.path / "existing.yaml"); }) == 1);
  }
  SUBCASE("move in") {
    CHECK(fx.calls_after([&] { fs::rename(outside.path / "incoming.yaml", dir.path / "incoming.yaml"); }) ==
          1);
  }
  SUBCASE("move out") {
    CHECK(fx.calls_after([&] { fs::rename(dir.path / "existing.yaml", outside.path / "existing.yaml"); }) ==
          1);
  }
}

TEST_CASE("file_watch: a burst of writes gives exactly one call") {
  temp_dir dir;
  fixture fx;
  fx.start({{dir.path.string(), std::nullopt}});

  CHECK(fx.calls_after([&] {
    for (int i = 0; i < 20; ++i) write_file(dir.path / "rules.yaml", std::to_string(i));
  }) == 1);
}

TEST_CASE("file_watch: a change while on_change runs gives another call") {
  temp_dir dir;
  fixture fx;
  bool wrote = false;
  fx.on_call = [&] {
    if (wrote) return;
    wrote = true;
    write_file(dir.path / "during.yaml");
  };
  fx.start({{dir.path.string(), std::nullopt}});

  write_file(dir.path / "rules.yaml");
  fx.run_until([&] { return fx.calls >= 2; }, 2s);
  fx.run_for(3 * fx.debounce);
  CHECK(fx.calls == 2);
}

TEST_CASE("file_watch: with only_name, a symlink swap counts and other entries do not") {
  temp_dir parent;
  make_swappable_root(parent.path);
  fixture fx;
  fx.start({{parent.path.string(), "current"}});

  CHECK(fx.calls_after_quiet_period([&] { write_file(parent.path / "unrelated.yaml"); }) == 0);
  CHECK(fx.calls_after_quiet_period([&] { write_file(parent.path / "current" / "config" / "a.yaml"); }) == 0);
  CHECK(fx.calls_after([&] { swap_current_to(parent.path, "new"); }) == 1);
}

TEST_CASE("file_watch: after a symlink swap the new directory is watched and the old one is not") {
  temp_dir parent;
  make_swappable_root(parent.path);
  fixture fx;
  fx.start(
      {{parent.path.string(), "current"}, {(parent.path / "current" / "config").string(), std::nullopt}});

  CHECK(fx.calls_after([&] { write_file(parent.path / "old" / "config" / "a.yaml"); }) == 1);
  CHECK(inotify_watch_count() == 2);
  CHECK(fx.calls_after([&] { swap_current_to(parent.path, "new"); }) == 1);
  // The parent and the new directory: the old directory's watch was removed, not leaked.
  CHECK(inotify_watch_count() == 2);
  CHECK(fx.calls_after([&] { write_file(parent.path / "new" / "config" / "a.yaml"); }) == 1);
  CHECK(fx.calls_after_quiet_period([&] { write_file(parent.path / "old" / "config" / "b.yaml"); }) == 0);
}

TEST_CASE("file_watch: a missing directory is watched after it appears and a re-arm happens") {
  temp_dir dir;
  const fs::path later = dir.path / "later";
  fixture fx;
  CHECK_NOTHROW(fx.start({{dir.path.string(), std::nullopt}, {later.string(), std::nullopt}}));

  CHECK(fx.calls_after([&] { fs::create_directory(later); }) == 1);
  CHECK(fx.calls_after([&] { write_file(later / "a.yaml"); }) == 1);
}

TEST_CASE("file_watch: the watched directory going away gives a call") {
  temp_dir dir;
  const fs::path watched = dir.path / "watched";
  fs::create_directory(watched);
  fixture fx;
  fx.start({{watched.string(), std::nullopt}});

  SUBCASE("removed") {
    CHECK(fx.calls_after([&] { fs::remove(watched); }) == 1);
  }
  SUBCASE("moved away") {
    CHECK(fx.calls_after([&] { fs::rename(watched, dir.path / "moved"); }) == 1);
  }
}

TEST_CASE("file_watch: a queue overflow gives a call") {
  long max_queued = 0;
  std::ifstream("/proc/sys/fs/inotify/max_queued_events") >> max_queued;
  if (max_queued <= 0 || max_queued > 100000) {
    MESSAGE("skipped: max_queued_events is ", max_queued);
    return;
  }
  temp_dir parent;
  write_file(parent.path / "a");
  write_file(parent.path / "b");
  fixture fx;
  // No event about `current` is ever made: only the overflow can cause a call.
  fx.start({{parent.path.string(), "current"}});

  CHECK(fx.calls_after([&] {
    // Alternating names, because inotify merges an event identical to the last one queued.
    const std::string a = (parent.path / "a").string();
    const std::string b = (parent.path / "b").string();
    long failed = 0;
    for (long i = 0; i < max_queued + 100; ++i) failed += ::chmod((i % 2 == 0 ? a : b).c_str(), 0600) != 0;
    REQUIRE(failed == 0);
  }) == 1);
}

TEST_CASE("file_watch: no call after stop") {
  temp_dir dir;
  fixture fx;
  fx.start({{dir.path.string(), std::nullopt}});

  SUBCASE("after a call") {
    CHECK(fx.calls_after([&] { write_file(dir.path / "a.yaml"); }) == 1);
    fx.watch->stop();
    CHECK(fx.calls_after_quiet_period([&] { write_file(dir.path / "b.yaml"); }) == 0);
  }
  SUBCASE("with a call pending") {
    write_file(dir.path / "a.yaml");
    // Long enough to read the event, too short for the debounce timer (started after the read) to fire.
    fx.run_for(fx.debounce / 2);
    fx.watch->stop();
    CHECK(fx.calls_after_quiet_period([] {}) == 0);
  }
  SUBCASE("from inside on_change") {
    fx.on_call = [&] { fx.watch->stop(); };
    CHECK(fx.calls_after([&] { write_file(dir.path / "a.yaml"); }) == 1);
    CHECK(fx.calls_after_quiet_period([&] { write_file(dir.path / "b.yaml"); }) == 0);
  }
  SUBCASE("destroyed with a call pending") {
    write_file(dir.path / "a.yaml");
    fx.run_for(fx.debounce / 2);
    fx.watch.reset();
    CHECK(fx.calls_after_quiet_period([] {}) == 0);
  }
}

TEST_CASE("file_watch: stop or destruction from another thread waits for a running on_change") {
  temp_dir dir;
  boost::asio::io_context ioc;
  auto work = boost::asio::make_work_guard(ioc);
  std::atomic<int> calls{0};
  std::atomic<int> running{0};
  std::atomic<bool> overlapped{false};
  auto watch = std::make_unique<file_watch>(
      ioc.get_executor(), std::vector<file_watch::target>{{dir.path.string(), std::nullopt}}, 20ms, [&] {
        if (running.fetch_add(1) != 0) overlapped = true;
        ++calls;
        // A slow reload, so that stop() lands while it runs.
        std::this_thread::sleep_for(150ms);
        running.fetch_sub(1);
      });
  watch->start();
  std::thread t1([&] { ioc.run(); });
  std::thread t2([&] { ioc.run(); });

  write_file(dir.path / "a.yaml");
  const auto deadline = clock_type::now() + 2s;
  while (running == 0 && clock_type::now() < deadline) std::this_thread::sleep_for(1ms);
  REQUIRE(running == 1);
  // The other thread reads this event; its handler waits on the strand, busy with on_change.
  write_file(dir.path / "b.yaml");
  std::this_thread::sleep_for(30ms);
  SUBCASE("stop") {
    watch->stop();
  }
  // The queued read handler must then not touch the destroyed watch (ASan reports it if it does).
  SUBCASE("destroy") {
    watch.reset();
  }
  CHECK(running == 0);
  const int after_stop = calls;
  write_file(dir.path / "c.yaml");
  std::this_thread::sleep_for(150ms);
  CHECK(calls == after_stop);
  CHECK_FALSE(overlapped);

  work.reset();
  ioc.stop();
  t1.join();
  t2.join();
}

TEST_CASE("file_watch: start throws when inotify cannot be opened") {
  temp_dir dir;
  boost::asio::io_context ioc;
  file_watch watch(ioc.get_executor(), {{dir.path.string(), std::nullopt}}, 50ms, [] {});
  // With the descriptor limit at the lowest free descriptor, every descriptor below it is taken.
  const int lowest_free = ::dup(0);
  REQUIRE(lowest_free >= 0);
  ::close(lowest_free);
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  rlimit lowered = saved;
  lowered.rlim_cur = static_cast<rlim_t>(lowest_free);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &lowered) == 0);
  std::string what;
  try {
    watch.start();
  } catch (const std::system_error& e) {
    what = e.what();
  }
  ::setrlimit(RLIMIT_NOFILE, &saved);
  CHECK(what.find("inotify") != std::string::npos);
}
