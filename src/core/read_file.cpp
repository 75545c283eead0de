#include "core/read_file.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace sluice::core {

namespace {

// (Both sides are strings: each is named.)
using read_result = boost::system::result<std::string, std::string>;

read_result failed(std::string why) {
  return read_result(boost::system::in_place_error, std::move(why));
}

}  // namespace

read_result read_file(const std::string& path) {
  // A directory opens, and reads as nothing: it would pass for an empty file.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return boost::system::result<std::string, std::string>(boost::system::in_place_error,
                                                           std::strerror(EISDIR));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return boost::system::result<std::string, std::string>(boost::system::in_place_error,
                                                           std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return failed("read error");
  }
  return read_result(boost::system::in_place_value, std::move(text).str());
}

}  // namespace sluice::core
