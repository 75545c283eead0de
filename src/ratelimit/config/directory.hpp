#pragma once
// Where rule files live and how they are read: RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY, walked
// recursively; every regular file (or symlink to one) is a rule file, named as upstream names it: the path
// relative to the walk root with '/' turned into '.' (e.g. "config.basic.yaml" in watch-root mode).

#include <string>
#include <vector>

#include "ratelimit/config/yaml_loader.hpp"

namespace sluice::ratelimit::config {

struct directory_layout {
  std::string root = "/srv/runtime_data/current";  // RUNTIME_ROOT
  std::string subdirectory;                        // RUNTIME_SUBDIRECTORY
  std::string app_directory = "config";            // RUNTIME_APPDIRECTORY
  bool watch_root = true;                          // RUNTIME_WATCH_ROOT
  bool ignore_dotfiles = false;                    // RUNTIME_IGNOREDOTFILES

  // The directory that holds the rule files.
  std::string rules_directory() const;
  // Prefix of file names in messages: "<appdir>." in watch-root mode, "" in directory mode (as upstream).
  std::string name_prefix() const;
};

struct read_result {
  std::vector<config_file> files;  // sorted by name
  std::string error;               // set when the directory or a file cannot be read
};

// Entries whose name starts with ".." (Kubernetes' `..data` and timestamped dirs) are always skipped; other
// dot-entries only with ignore_dotfiles.
read_result read_rule_files(const std::string& directory, const std::string& name_prefix,
                            bool ignore_dotfiles);

}  // namespace sluice::ratelimit::config
