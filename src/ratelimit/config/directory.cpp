#include "ratelimit/config/directory.hpp"

#include <algorithm>
#include <filesystem>

#include "core/log.hpp"
#include "core/read_file.hpp"
#include "core/strings.hpp"

namespace sluice::ratelimit::config {

namespace fs = std::filesystem;

std::string directory_layout::rules_directory() const {
  fs::path p(root);
  if (!subdirectory.empty()) p /= subdirectory;
  if (!app_directory.empty()) p /= app_directory;
  return p.string();
}

std::string directory_layout::name_prefix() const {
  return watch_root && !app_directory.empty() ? app_directory + "." : std::string();
}

read_result read_rule_files(const std::string& directory, const std::string& name_prefix,
                            bool ignore_dotfiles) {
  read_result result;
  std::error_code ec;
  fs::recursive_directory_iterator it(directory, ec), end;
  if (ec) {
    result.error = core::cat("cannot read rule directory ", directory, ": ", ec.message());
    return result;
  }
  for (; it != end; it.increment(ec)) {
    if (ec) {
      result.error = core::cat("cannot read rule directory ", directory, ": ", ec.message());
      return result;
    }
    const fs::path& path = it->path();
    std::string name = path.filename().string();
    if (name.starts_with("..") || (ignore_dotfiles && name.starts_with("."))) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_directory(ec)) {
      if (it->is_symlink(ec))
        core::log_warn("rule directory entry ", path.string(), " is a symlink to a directory; skipped");
      continue;
    }
    if (!it->is_regular_file(ec)) continue;
    auto content = core::read_file(path.string());
    if (!content) {
      result.error = core::cat("cannot read rule file ", path.string());
      return result;
    }
    std::string relative = path.lexically_relative(directory).string();
    std::ranges::replace(relative, '/', '.');
    result.files.push_back({name_prefix + relative, std::move(*content)});
  }
  std::ranges::sort(result.files, {}, &config_file::name);
  return result;
}

}  // namespace sluice::ratelimit::config
