#include "ratelimit/backends/memory/snapshot_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "core/problem.hpp"
#include "core/read_file.hpp"
#include "core/strings.hpp"
#include "ratelimit/backends/memory/snapshot_format.hpp"

namespace sluice::ratelimit::backends::memory {

namespace {

std::string folder_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string system_error() {
  return std::strerror(errno);
}

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Writes all of `bytes` to a new file at `path` and syncs it; why not.
core::problem write_synced(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return core::cat("cannot create ", path, ": ", system_error());
  while (!bytes.empty()) {
    const auto n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      auto error = core::cat("cannot write ", path, ": ", system_error());
      ::close(fd);
      return error;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  if (::fsync(fd) != 0) {
    auto error = core::cat("cannot sync ", path, ": ", system_error());
    ::close(fd);
    return error;
  }
  if (::close(fd) != 0) return core::cat("cannot close ", path, ": ", system_error());
  return std::nullopt;
}

}  // namespace

core::problem check_snapshot_folder(const std::string& path) {
  // The file is replaced by a rename: a directory (or another non-file) there would fail every write.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return core::cat(path, " is ", S_ISDIR(st.st_mode) ? "a directory" : "not a regular file",
                     " (name the file the counters are written to)");
  }
  const std::string probe = core::cat(path, ".probe-", ::getpid());
  if (auto error = write_synced(probe, "")) return error;
  ::unlink(probe.c_str());
  return std::nullopt;
}

snapshot_result write_snapshot(const memory_backend& backend, const std::string& path, std::int64_t now) {
  const auto start = std::chrono::steady_clock::now();
  snapshot_encoder encoder;
  backend.visit_live(
      now,
      [&](std::string_view key, std::uint64_t value, std::int64_t expires_at) {
        encoder.add(key, value, expires_at);
      },
      [&](std::string_view key, const detail::lease_entry& leases) {
        if (!leases.holders.empty()) {
          encoder.add_holders(key, leases.holders, leases.expires_at);
        } else {
          encoder.add_leases(key, leases.slices, leases.expires_at);
        }
      });
  const std::size_t counters = encoder.count();
  const std::string bytes = encoder.finish(now);
  const std::string temporary = core::cat(path, ".tmp-", ::getpid());
  if (auto error = write_synced(temporary, bytes)) {
    ::unlink(temporary.c_str());
    throw std::runtime_error(*error);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    auto error = core::cat("cannot rename ", temporary, " to ", path, ": ", system_error());
    ::unlink(temporary.c_str());
    throw std::runtime_error(error);
  }
  // The rename itself lasts once the folder is synced.
  const std::string folder = folder_of(path);
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return {counters, 0, since(start)};
}

restore_outcome restore_snapshot(memory_backend& backend, const std::string& path, std::int64_t now) {
  const auto start = std::chrono::steady_clock::now();
  restore_outcome out;
  const auto bytes = core::read_file(path);
  if (!bytes) {
    if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) {
      out.missing = true;
    } else {
      out.error = bytes.error();
    }
    return out;
  }
  const auto tally = [&](bool restored) { ++(restored ? out.result.counters : out.result.dropped); };
  out.error = read_snapshot(
      *bytes,
      [&](std::string_view key, std::uint64_t value, std::int64_t expires_at) {
        tally(expires_at > now && backend.restore(key, value, expires_at));
      },
      [&](std::string_view key, const limiter::lease_slices& slices, std::int64_t expires_at) {
        tally(expires_at > now && backend.restore_leases(key, {slices, {}, expires_at}));
      },
      [&](std::string_view key, const limiter::lease_holders& holders, std::int64_t expires_at) {
        tally(expires_at > now && backend.restore_leases(key, {{}, holders, expires_at}));
      });
  out.result.milliseconds = since(start);
  return out;
}

}  // namespace sluice::ratelimit::backends::memory
