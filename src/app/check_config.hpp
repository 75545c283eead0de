#pragma once
// `sluice check-config [flags] DIR`: loads the rule files as the server would and prints what the server
// would say of them: the warnings it logs, then the error or "all rate limit configs ok". Exit 0 when they
// load (with --strict: and gave no warning), 1 when not, 2 for a usage error. Its flags are parsed as every
// subcommand's (ratelimit/client/flag_parser.hpp): before or after DIR, `--flag value` or `--flag=value`.

#include <span>
#include <string_view>

namespace sluice {

// The arguments after "check-config".
int check_config(std::span<const std::string_view> args);

// Its synopsis, one line: what `sluice --help` shows of it.
extern const std::string_view check_config_synopsis;

}  // namespace sluice
