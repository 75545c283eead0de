#pragma once
// Go's flag package, as upstream's client parses its flags: `-name value`, `--name value`, `-name=value`; a
// boolean flag takes no value unless written `-name=false`; `-h`/`-help`/`--help` asks for the usage. The one
// parser of every subcommand (client, rlqs-client, counters, explain, check-config); sans-io, so unit-tested
// and fuzzed apart from any call.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/env.hpp"
#include "core/problem.hpp"
#include "core/strings.hpp"

namespace sluice::ratelimit::client {

struct help_requested {};

// One flag and where its value goes: a string or a boolean of the options, or a parser of its own. A flag
// with `refused` set is one a user may expect here (another subcommand's): giving it stops the command with
// that reason.
template <class Options>
struct flag_spec {
  std::string_view name;
  std::string Options::*text = nullptr;
  bool Options::*boolean = nullptr;
  core::problem (*parse)(std::string_view value, Options& o) = nullptr;
  std::string_view refused = {};
};

// Fills `o` from `args`. Nothing when every argument was taken; else what stops the command: help_requested,
// or an error naming the flag. Without `operands`, every argument must be a flag (as upstream's client); with
// it, the other arguments are collected there, before, between or after the flags, and every argument after
// `--` is one.
template <class Options>
std::optional<std::variant<help_requested, std::string>> parse_flags(
    std::span<const std::string_view> args, std::span<const flag_spec<Options>> specs, Options& o,
    std::vector<std::string_view>* operands = nullptr) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "--" && operands != nullptr) {
      operands->insert(operands->end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (arg == "--" && i + 1 == args.size()) break;  // Go's end of flags
    if (arg.size() < 2 || arg[0] != '-' || arg == "--") {
      if (operands != nullptr) {
        operands->push_back(arg);
        continue;
      }
      return core::cat("unexpected argument '", arg, "': every argument is a flag (see -help)");
    }
    const std::string_view dashes = arg.starts_with("--") ? "--" : "-";
    arg.remove_prefix(dashes.size());
    if (arg == "h" || arg == "help") return help_requested{};
    const auto eq = arg.find('=');
    const std::string_view name = arg.substr(0, eq);
    const flag_spec<Options>* spec = nullptr;
    for (const auto& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) return core::cat("flag provided but not defined: ", dashes, name);
    if (!spec->refused.empty()) return core::cat(dashes, name, " ", spec->refused);
    if (spec->boolean != nullptr) {
      const auto value =
          eq == std::string_view::npos ? std::optional<bool>(true) : core::parse_go_bool(arg.substr(eq + 1));
      if (!value) return core::cat("invalid boolean value '", arg.substr(eq + 1), "' for ", dashes, name);
      o.*spec->boolean = *value;
      continue;
    }
    std::string_view value;
    if (eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return core::cat("flag needs an argument: ", dashes, name);
    }
    if (spec->text != nullptr) {
      o.*spec->text = value;
    } else if (auto error = spec->parse(value, o)) {
      return *error;
    }
  }
  return std::nullopt;
}

// What parse_flags stopped with, as a command's result type.
template <class Result>
Result stopped(std::variant<help_requested, std::string>&& stop) {
  return std::visit([](auto&& v) -> Result { return std::move(v); }, std::move(stop));
}

}  // namespace sluice::ratelimit::client
