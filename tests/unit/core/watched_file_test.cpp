// core::watched_file: a directory is refused as one; a deleted file keeps what was applied unless its owner
// drops it (on_gone, once), and the same text back is applied again.
#include "core/watched_file.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../../support/temp_dir.hpp"
#include "core/read_file.hpp"

using namespace sluice;

TEST_CASE("read_file: a directory is not read as an empty file") {
  testing::temp_dir dir("sluice-read-file");
  const auto read = core::read_file(dir.path.string());
  REQUIRE_FALSE(read);
  CHECK(read.error() == "Is a directory");
  const std::string want = dir.path.string() + ": cannot read the file: Is a directory";
  CHECK_THROWS_WITH(core::watched_file(dir.path.string(), [](const std::string&) { return std::nullopt; }),
                    want.c_str());
}

TEST_CASE("watched_file: a deleted file calls on_gone once; the same text back is applied again") {
  testing::temp_dir dir("sluice-watched-file");
  const auto path = dir.write("tokens", "a\n").string();
  std::vector<std::string> applied;
  int gone = 0;
  core::watched_file file(
      path,
      [&](const std::string& text) -> std::optional<std::string> {
        applied.push_back(text);
        return std::nullopt;
      },
      [&] {
        ++gone;
        return std::string("dropped");
      });
  CHECK(applied == std::vector<std::string>{"a\n"});
  CHECK_FALSE(file.reload());  // the same text: skipped
  CHECK(applied.size() == 1);
  std::filesystem::remove(path);
  CHECK(file.reload() == path + ": the file was deleted");
  CHECK(file.reload());
  CHECK(gone == 1);
  dir.write("tokens", "a\n");
  CHECK_FALSE(file.reload());
  CHECK(applied == std::vector<std::string>{"a\n", "a\n"});
  std::filesystem::remove(path);
  CHECK(file.reload());
  CHECK(gone == 2);

  // Without on_gone, a deleted file keeps what was applied, as any read error.
  const auto other = dir.write("keys", "k\n").string();
  int calls = 0;
  core::watched_file kept(other, [&](const std::string&) -> std::optional<std::string> {
    ++calls;
    return std::nullopt;
  });
  std::filesystem::remove(other);
  CHECK(kept.reload()->starts_with(other + ": cannot read the file: "));
  dir.write("keys", "k\n");
  CHECK_FALSE(kept.reload());
  CHECK(calls == 1);  // the same text as applied: nothing changed
}
