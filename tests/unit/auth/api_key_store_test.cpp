// The API key file format and the store: lookups, reload keeping the old keys on errors, and reload on change
// through a real inotify watch.

#include "auth/api_key_store.hpp"

#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

#include "../../support/temp_dir.hpp"
#include "auth/api_key_file.hpp"

namespace {

namespace fs = std::filesystem;
using namespace sluice::auth;
using namespace std::chrono_literals;

// The key file in its own directory (the store watches the directory).
struct temp_file {
  sluice::testing::temp_dir dir{"sluice-api-keys"};
  fs::path path;
  explicit temp_file(const std::string& content) : path(dir.write("keys.yaml", content)) {}
  void write(const std::string& content) const { dir.write("keys.yaml", content); }
};

std::string error_of(const std::string& text) {
  return parse_api_key_file(text).error;
}

}  // namespace

TEST_CASE("api key file: entries, defaults and names") {
  auto f = parse_api_key_file(
      "keys:\n  - {key: a1, name: alice}\n  - key: b2\n    enabled: false\n  - key: 123\n");
  REQUIRE(f.error == "");
  REQUIRE(f.keys.size() == 3);
  CHECK(f.keys[0].key == "a1");
  CHECK(f.keys[0].name == "alice");
  CHECK(f.keys[0].enabled);
  CHECK(f.keys[1].name == "");
  CHECK_FALSE(f.keys[1].enabled);
  CHECK(f.keys[2].key == "123");
  CHECK(parse_api_key_file("keys: []\n").keys.empty());
  CHECK(parse_api_key_file("keys:\n").error == "");
}

TEST_CASE("api key file: every error says what is wrong") {
  CHECK(error_of("") == "expected a map with a `keys` list at the top");
  CHECK(error_of("- key: a\n") == "expected a map with a `keys` list at the top");
  CHECK(error_of("other: 1\n") == "unknown field `other` (expected keys) (line 1)");
  CHECK(error_of("{}\n") == "no `keys` list");
  CHECK(error_of("keys: []\nkeys: [{key: a}]\n") == "`keys` is given twice (line 2)");
  CHECK(error_of("keys:\n  - {key: a, enabled: false, enabled: true}\n") ==
        "keys[0]: `enabled` is given twice (line 2)");
  CHECK(error_of("keys: {key: a}\n") == "`keys` must be a list (line 1)");
  CHECK(error_of("keys:\n  - a\n") == "keys[0] must be a map with `key` (line 2)");
  CHECK(error_of("keys:\n  - name: x\n") == "keys[0] has no `key` (or an empty one) (line 2)");
  CHECK(error_of("keys:\n  - key: \"\"\n") == "keys[0] has no `key` (or an empty one) (line 2)");
  CHECK(error_of("keys:\n  - key: ~\n") == "`key` must be a string (line 2)");
  CHECK(error_of("keys:\n  - key: [a]\n") == "`key` must be a string (line 2)");
  CHECK(error_of("keys:\n  - key: a\n    enabled: maybe\n") ==
        "`enabled` must be true or false, got 'maybe' (line 3)");
  CHECK(error_of("keys:\n  - key: a\n    enable: true\n") ==
        "keys[0]: unknown field `enable` (expected key, name, enabled) (line 3)");
  CHECK(error_of("keys:\n  - key: a\n  - key: a\n") == "keys[1] repeats the key of an earlier entry");
  CHECK(error_of("keys: [").starts_with("not valid YAML: "));
}

TEST_CASE("api key store: unknown, disabled, valid") {
  temp_file f("keys:\n  - {key: good, name: alice}\n  - {key: off, name: bob, enabled: false}\n");
  api_key_store store(f.path.string());
  CHECK(store.size() == 2);
  auto valid = store.lookup("good");
  CHECK(valid.state == key_state::valid);
  CHECK(valid.name == "alice");
  CHECK(store.lookup("off").state == key_state::disabled);
  CHECK(store.lookup("goo").state == key_state::unknown);
  CHECK(store.lookup("good ").state == key_state::unknown);
  CHECK(store.lookup("").state == key_state::unknown);
}

TEST_CASE("api key store: a bad file at start-up names the file") {
  temp_file f("keys: [");
  try {
    api_key_store store(f.path.string());
    FAIL("no exception");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).starts_with(f.path.string() + ": not valid YAML"));
  }
  try {
    api_key_store store((f.dir.path / "missing.yaml").string());
    FAIL("no exception");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) ==
          (f.dir.path / "missing.yaml").string() + ": cannot read the file: No such file or directory");
  }
}

TEST_CASE("api key store: reload swaps keys; a bad file keeps the old ones") {
  temp_file f("keys: [{key: one}]\n");
  api_key_store store(f.path.string());
  f.write("keys: [{key: two}]\n");
  CHECK_FALSE(store.reload());
  CHECK(store.lookup("one").state == key_state::unknown);
  CHECK(store.lookup("two").state == key_state::valid);
  f.write("keys: [{key: three, enabled: sometimes}]\n");
  auto error = store.reload();
  REQUIRE(error);
  CHECK(*error == f.path.string() + ": `enabled` must be true or false, got 'sometimes' (line 1)");
  CHECK(store.lookup("two").state == key_state::valid);
  fs::remove(f.path);
  CHECK(store.reload());
  CHECK(store.lookup("two").state == key_state::valid);
}

TEST_CASE("api key store: the watch reloads after a change") {
  temp_file f("keys: [{key: one}]\n");
  boost::asio::io_context ioc;  // first: the store's file watch lives on it, so it must be destroyed last
  api_key_store store(f.path.string());
  store.watch(ioc.get_executor(), 20ms);
  f.write("keys: [{key: one, enabled: false}, {key: two}]\n");
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (store.lookup("two").state != key_state::valid && std::chrono::steady_clock::now() < deadline)
    ioc.run_for(20ms);
  CHECK(store.lookup("two").state == key_state::valid);
  CHECK(store.lookup("one").state == key_state::disabled);
  store.stop();
}
