#include "core/stop_signals.hpp"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <vector>

// Each case runs in a child process of its own: a signal sent to the process must find only the threads
// stop_signals made (this test binary's other threads would take it and die).
namespace {

// The child's exit code: 0 when `body` returned true.
int in_child(bool (*body)()) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body() ? 0 : 1);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs `io` until `calls` holds `n` signals or 5 s have passed.
void run_until(boost::asio::io_context& io, const std::vector<int>& calls, std::size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (calls.size() < n && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

TEST_CASE("stop_signals: a signal before the watch waits for it; each one after is called on the executor") {
  CHECK(in_child([] {
          sluice::core::stop_signals signals;
          kill(getpid(), SIGTERM);  // during "start-up": nobody watches yet, and the process lives on
          usleep(50'000);
          boost::asio::io_context io;
          std::vector<int> calls;
          signals.watch(io.get_executor(), [&](int signo) { calls.push_back(signo); });
          run_until(io, calls, 1);
          kill(getpid(), SIGINT);
          run_until(io, calls, 2);
          // Before io goes: the watcher's thread may still be inside its post to io (it signals io's
          // condition variable after the handler could run), and unwatch waits for that (TSan saw it).
          signals.unwatch();
          return calls == std::vector<int>{SIGTERM, SIGINT};
        }) == 0);
}

TEST_CASE("stop_signals: after unwatch nothing is called, and the next watch gets what came meanwhile") {
  CHECK(in_child([] {
          sluice::core::stop_signals signals;
          boost::asio::io_context io;
          std::vector<int> first, second;
          signals.watch(io.get_executor(), [&](int signo) { first.push_back(signo); });
          signals.unwatch();
          kill(getpid(), SIGINT);
          usleep(50'000);
          io.poll();
          if (!first.empty()) return false;
          signals.watch(io.get_executor(), [&](int signo) { second.push_back(signo); });
          run_until(io, second, 1);
          signals.unwatch();  // before io goes, as above
          return second == std::vector<int>{SIGINT};
        }) == 0);
}
