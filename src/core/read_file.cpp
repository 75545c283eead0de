#include "core/read_file.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace sluice::core {

std::optional<std::string> read_file(const std::string& path, std::string& error) {
  // A directory opens, and reads as nothing: it would pass for an empty file.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    error = std::strerror(EISDIR);
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = std::strerror(errno);
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    error = "read error";
    return std::nullopt;
  }
  return std::move(text).str();
}

}  // namespace sluice::core
