#include "redis_server.hpp"

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <thread>

namespace sluice::sim {

namespace {

// Whether something accepts connections on the unix socket at `path`.
bool accepts(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

redis_server::redis_server()
    : dir_("sluice-sim-redis", std::filesystem::temp_directory_path().string()),
      socket_((dir_.path / "redis.sock").string()) {
  const std::string log = (dir_.path / "redis.log").string();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("cannot fork for redis-server");
  if (pid_ == 0) {
    ::execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", socket_.c_str(), "--save", "",
             "--appendonly", "no", "--dir", dir_.path.c_str(), "--logfile", log.c_str(), nullptr);
    ::_exit(127);
  }
  // (The folder goes with a failed start: its log is quoted.)
  auto said = [&] {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.empty() ? std::string("nothing in its log") : "its log: " + text.substr(0, 600);
  };
  // Until it answers (a busy machine starts it slowly), or it exited.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!accepts(socket_)) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("redis-server exited at start (is it installed? scripts/setup installs it); " +
                               said());
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      throw std::runtime_error("redis-server did not answer on " + socket_ + " within 10 s; " + said());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

redis_server::~redis_server() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

}  // namespace sluice::sim
