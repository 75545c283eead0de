#pragma once
// A private directory (under /tmp, or `base`) for a test, removed with everything in it when the test ends.

#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace sluice::testing {

struct temp_dir {
  std::filesystem::path path;

  explicit temp_dir(const std::string& tag = "sluice", const std::string& base = "/tmp") {
    std::string pattern = base + "/" + tag + "-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::system_error(errno, std::generic_category(), "mkdtemp");
    path = pattern;
  }
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  // Writes `name` by a rename, as editors and ConfigMaps replace files: a reader never sees half a file.
  std::filesystem::path write(const std::string& name, const std::string& text) const {
    std::filesystem::path target = path / name;
    std::filesystem::path tmp = path / ("." + name + ".tmp");
    {
      std::ofstream out(tmp, std::ios::binary);
      out << text;
      if (!out.flush()) throw std::system_error(errno, std::generic_category(), "write " + tmp.string());
    }
    std::filesystem::rename(tmp, target);
    return target;
  }
};

}  // namespace sluice::testing
