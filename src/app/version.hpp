#pragma once

namespace sluice {
// The project's semantic version is core::version (meson's project version); this is the git commit it was
// built from (40 hex digits, then "-dirty" when the work tree had uncommitted changes), or "unknown" outside
// a checkout when -Dcommit= was not given.
extern const char* const build_commit;
}  // namespace sluice
