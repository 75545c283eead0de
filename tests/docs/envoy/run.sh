#!/usr/bin/env bash
# Checks the Envoy configuration snippets of the docs against Envoy's API protos: installs the npm packages the
# checker needs (once, and again whenever package-lock.json changes), runs check_envoy_snippets.mjs on the Markdown
# files given (default: README.md and every *.md under docs/), then selftest.mjs (broken fixtures must be caught).
#
#   tests/docs/envoy/run.sh [--no-selftest] [FILE.md...]
#
# A snippet is checked when a marker precedes its ```yaml block: <!-- envoy: full.proto.Message --> (or
# Message[] for a list); see check_envoy_snippets.mjs. Needs Node.js 18+ and npm. Exit status: 0 when all passed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
selftest=1
files=()
for arg in "$@"; do
  case $arg in
    --no-selftest) selftest=0 ;;
    -h | --help) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run.sh: unknown option: $arg" >&2; exit 2 ;;
    *) files+=("$arg") ;;
  esac
done

# shellcheck source=../../support/npm_packages.sh
source "$here/../../support/npm_packages.sh"
npm_packages_ready "$here" "$here/package-lock.json"

if ((${#files[@]} == 0)); then
  # From the repository, so that the messages name README.md and docs/... as a reader knows them.
  cd "$repo"
  files=(README.md)
  while IFS= read -r -d '' f; do files+=("$f"); done < <(find docs -name '*.md' -print0 | sort -z)
fi

status=0
node "$here/check_envoy_snippets.mjs" "${files[@]}" || status=$?
if ((selftest)); then
  node "$here/selftest.mjs" || status=$?
fi
exit "$status"
