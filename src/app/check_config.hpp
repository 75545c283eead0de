#pragma once
// `sluice check-config DIR [--merge-domain-config] [--strict]`: loads the rule files as the server would and
// prints what the server would say of them: the warnings it logs, then the error or "all rate limit configs
// ok". Exit 0 when they load (with --strict: and gave no warning), 1 when not, 2 for a usage error.

namespace sluice {

int check_config(int argc, char** argv);

}  // namespace sluice
