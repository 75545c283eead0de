#pragma once
// Reads a whole file into a string: rule files, key files, mapping and OpenAPI documents, key sets, profiles.

#include <boost/system/result.hpp>
#include <string>

namespace sluice::core {

// The file's bytes, or why not (the system's text, e.g. "No such file or directory").
boost::system::result<std::string, std::string> read_file(const std::string& path);

}  // namespace sluice::core
