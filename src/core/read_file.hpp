#pragma once
// Reads a whole file into a string: rule files, key files, mapping and OpenAPI documents, key sets, profiles.

#include <optional>
#include <string>

namespace sluice::core {

// The file's bytes, or nothing with `error` saying why (the system's text, e.g. "No such file or directory").
std::optional<std::string> read_file(const std::string& path, std::string& error);

}  // namespace sluice::core
