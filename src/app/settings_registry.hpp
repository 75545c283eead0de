#pragma once
// Every environment setting Sluice reads, assembled from each module's own declarations (core/setting.hpp),
// in the order of the reference page: what `sluice settings` prints, what docs/reference/settings.md is made
// from, and what the start-up check of unknown variables compares names with.

#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.hpp"

namespace sluice {

struct settings_section {
  std::string_view title;
  std::vector<core::setting> settings;
  // The documentation pages that explain these settings at length, as Markdown links relative to
  // docs/reference/ (the reference page links to them; tests/docs checks that they exist).
  std::string_view details;
};

const std::vector<settings_section>& settings_registry();

// `sluice settings [--format text|markdown]`: every setting with its default and meaning, one line each
// (text), or the reference page (markdown). -> the exit code.
int print_settings(std::span<const std::string_view> args, std::ostream& out, std::ostream& err);

// At start-up: one warning per variable that is not a setting but looks like one of Sluice's (a known
// prefix) and is one or two edits from a setting's name, naming it; and one for the variables upstream reads
// that Sluice does not. -> the warnings.
std::vector<std::string> unknown_setting_warnings(const core::env_reader& env);

}  // namespace sluice
