// MEMORY_SNAPSHOT_FILE: the memory backend's counters written and read back exactly (every algorithm's
// state), windows that ended dropped, the write atomic; and every kind of bad file refused with its reason,
// restoring nothing.
#include <doctest/doctest.h>

#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/read_file.hpp"
#include "ratelimit/backends/memory/snapshot_file.hpp"
#include "ratelimit/backends/memory/snapshot_format.hpp"
#include "service_fixture.hpp"

using namespace sluice;
using namespace sluice::ratelimit;
using namespace sluice::ratelimit::backends::memory;
using test::make_request;
using test::service_fixture;
using code = test::rls_response;

// Named: unity builds put several test files in one translation unit.
namespace snapshot_test {

namespace {

struct temp_dir {
  temp_dir()
      : path(std::filesystem::temp_directory_path() / ("sluice-snapshot-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  std::filesystem::path path;
};

const char* const rules = R"(domain: d
descriptors:
  - key: fixed
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: sliding
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window}
  - key: gcra
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: gcra, burst: 10}
  - key: second
    rate_limit: {unit: second, requests_per_unit: 10}
)";

std::uint32_t remaining(service_fixture& f, const char* key) {
  auto check = make_request("d", {{{key, "v"}}});
  check.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  return f.decide(check).statuses(0).limit_remaining();
}

std::string write_of(const std::vector<std::tuple<std::string, std::uint64_t, std::int64_t>>& entries) {
  snapshot_encoder e;
  for (const auto& [k, v, x] : entries) e.add(k, v, x);
  return e.finish(1);
}

void put_u32(std::string& s, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// Recomputes the trailing checksum after a change, so that only the change is judged.
void reseal(std::string& s) {
  const auto crc =
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size() - 4));
  put_u32(s, s.size() - 4, static_cast<std::uint32_t>(crc));
}

std::optional<std::string> error_of(const std::string& bytes) {
  std::size_t visited = 0;
  auto error = read_snapshot(bytes, [&](std::string_view, std::uint64_t, std::int64_t) { ++visited; });
  if (error) CHECK(visited == 0);
  return error;
}

}  // namespace

TEST_CASE("a snapshot brings back every algorithm's counters exactly, and drops windows that ended") {
  temp_dir dir;
  const auto file = dir.file("counters.bin");
  service_fixture a(rules);
  a.clock.set_micros(1'000'000'030LL * 1'000'000);
  for (const char* key : {"fixed", "sliding", "gcra", "second"}) {
    auto req = make_request("d", {{{key, "v"}}}, 3);
    CHECK(a.decide(req).overall_code() == code::OK);
  }
  const auto wrote = write_snapshot(a.backend, file, a.clock.now_seconds());
  CHECK(wrote.counters == 4);
  // Nothing but the file is left in the folder (the temporary one was renamed).
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path), {}) == 1);

  service_fixture b(rules);
  b.clock.set_micros(1'000'000'031LL * 1'000'000);  // a second later: the per-second window has ended
  const auto restored = restore_snapshot(b.backend, file, b.clock.now_seconds());
  CHECK(!restored.error);
  CHECK(restored.result.counters == 3);
  CHECK(restored.result.dropped == 1);
  CHECK(remaining(b, "fixed") == 7);
  CHECK(remaining(b, "sliding") == 7);
  CHECK(remaining(b, "gcra") == 7);  // an arrival time 3 intervals ahead; a second refills nothing (6 s each)
  CHECK(remaining(b, "second") == 10);

  // Written again, it replaces the file whole.
  CHECK(a.decide(make_request("d", {{{"fixed", "v"}}}, 2)).overall_code() == code::OK);
  write_snapshot(a.backend, file, a.clock.now_seconds());
  service_fixture c(rules);
  c.clock.set_micros(1'000'000'031LL * 1'000'000);
  CHECK(restore_snapshot(c.backend, file, c.clock.now_seconds()).result.counters == 3);
  CHECK(remaining(c, "fixed") == 5);
}

TEST_CASE("a missing file restores nothing, silently; an unwritable folder is refused") {
  temp_dir dir;
  service_fixture f(rules);
  const auto missing = restore_snapshot(f.backend, dir.file("none.bin"), 1);
  CHECK(missing.missing);
  CHECK(!missing.error);
  CHECK(check_snapshot_folder(dir.file("ok.bin")) == std::nullopt);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path), {}) == 0);  // the probe is gone
  const auto error = check_snapshot_folder(dir.file("no/such/folder/counters.bin"));
  REQUIRE(error);
  CHECK(error->find("No such file or directory") != std::string::npos);
  CHECK_THROWS_WITH_AS(write_snapshot(f.backend, dir.file("no/counters.bin"), 1),
                       doctest::Contains("cannot create"), std::runtime_error);
  // A directory at the path would fail every write: the start stops instead.
  std::filesystem::create_directory(dir.file("a-folder"));
  const auto folder = check_snapshot_folder(dir.file("a-folder"));
  REQUIRE(folder);
  CHECK(folder->find("is a directory") != std::string::npos);
}

TEST_CASE("leases per holder round-trip; a version 1 file cannot hold them") {
  snapshot_encoder encoder;
  limiter::lease_holders holders{{"req-1", 1, 5'000'000}, {"req-2", 3, 7'000'000}};
  CHECK(encoder.add_holders("{ai_tenant_acme_}600s_concurrency_holders", holders, 8));
  CHECK(!encoder.add_holders("k", {}, 8));
  const std::string bytes = encoder.finish(1);
  limiter::lease_holders read;
  std::string key;
  CHECK(!read_snapshot(
      bytes, [](std::string_view, std::uint64_t, std::int64_t) { FAIL("no counter"); }, {},
      [&](std::string_view k, const limiter::lease_holders& h, std::int64_t expires_at) {
        key = k;
        read = h;
        CHECK(expires_at == 8);
      }));
  CHECK(key == "{ai_tenant_acme_}600s_concurrency_holders");
  REQUIRE(read.size() == 2);
  CHECK(read[1].holder == "req-2");
  CHECK(read[1].slots == 3);
  CHECK(read[1].end_us == 7'000'000);
  std::string v1 = bytes;
  put_u32(v1, 8, 1);
  reseal(v1);
  CHECK(error_of(v1) == "entry 0 is of an unknown kind (2)");
}

TEST_CASE("bad files are refused whole, each with its reason") {
  const std::string good = write_of({{"a_k_v_1", 5, 100}, {"{b}_2", 7, 200}});
  CHECK(!error_of(good));
  CHECK(error_of("") == "not a Sluice memory snapshot");
  CHECK(error_of("SLUICEMX" + good.substr(8)) == "not a Sluice memory snapshot");
  CHECK(error_of(good.substr(0, 20)) == "truncated (20 bytes)");
  for (std::size_t cut = 32; cut < good.size(); ++cut) {
    CAPTURE(cut);
    CHECK(error_of(good.substr(0, cut)));
  }
  std::string flipped = good;
  flipped[40] ^= 1;
  CHECK(error_of(flipped) == "checksum mismatch (truncated or corrupt)");
  std::string v3 = good;
  put_u32(v3, 8, 3);
  reseal(v3);
  CHECK(error_of(v3) == "version 3 (this Sluice reads versions 1 to 2)");
  // Version 1 (before holders) is still read: an upgrade loses no counters.
  std::string v1 = good;
  put_u32(v1, 8, 1);
  reseal(v1);
  CHECK(!error_of(v1));
  std::string more = good.substr(0, good.size() - 4) + "xyz" + good.substr(good.size() - 4);
  reseal(more);
  CHECK(error_of(more) == "3 bytes after the last of 2 entries");
  std::string counted = good;
  counted[20] = 3;  // three entries announced, two present
  reseal(counted);
  CHECK(error_of(counted) == "truncated at entry 2 of 3");
  std::string long_key = good;
  put_u32(long_key, 29, (1u << 20) + 1);
  reseal(long_key);
  CHECK(error_of(long_key) == "entry 0 has a key of 1048577 bytes");
}

TEST_CASE("restoring stops at MEMORY_MAX_COUNTERS and keeps what the store holds") {
  temp_dir dir;
  const auto file = dir.file("many.bin");
  snapshot_encoder e;
  for (int i = 0; i < 1100; ++i) e.add("k" + std::to_string(i), static_cast<std::uint64_t>(i), 2'000'000'000);
  const auto bytes = e.finish(1);
  std::ofstream(file, std::ios::binary) << bytes;
  core::fake_clock clock(1'000'000'000);
  memory_backend small(clock, 1024);
  CHECK(small.restore("k5", 99, 2'000'000'000));  // already there: the file's k5 does not replace it
  const auto r = restore_snapshot(small, file, clock.now_seconds());
  CHECK(r.result.counters == 1023);
  CHECK(r.result.dropped == 77);
  std::uint64_t k5 = 0;
  small.visit_live(clock.now_seconds(), [&](std::string_view key, std::uint64_t value, std::int64_t) {
    if (key == "k5") k5 = value;
  });
  CHECK(k5 == 99);
}

}  // namespace snapshot_test
