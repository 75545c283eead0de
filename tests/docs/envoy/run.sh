#!/usr/bin/env bash
# Checks the Envoy configuration snippets of the docs against Envoy's API protos: installs the npm packages the
# checker needs (once, and again whenever package-lock.json changes), runs check_envoy_snippets.mjs on the Markdown
# files given (default: README.md and every *.md under docs/), then selftest.mjs (broken fixtures must be caught).
#
#   tests/docs/envoy/run.sh [--no-selftest] [FILE.md...]
#
# A snippet is checked when a marker precedes its ```yaml block: <!-- envoy: full.proto.Message --> (or
# Message[] for a list); see check_envoy_snippets.mjs. Needs Node.js 20+ and npm. Exit status: 0 when all passed.
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

die() { echo "run.sh: $*" >&2; exit 2; }
command -v node >/dev/null || die "node not found: install Node.js 20 or later (scripts/setup)"
command -v npm >/dev/null || die "npm not found: install npm"
node_major=$(node -p 'process.versions.node.split(".")[0]')
((node_major >= 20)) || die "Node.js $(node --version) is too old: 20 or later is needed"

# Install when the packages are missing or were installed from another package-lock.json.
stamp=$here/node_modules/.sluice-package-lock.sha256
want=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  echo "run.sh: installing the npm packages into $here/node_modules (npm ci)"
  log=$(mktemp)
  if ! (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >"$log" 2>&1); then
    cat "$log" >&2
    rm -f "$log"
    die "npm ci failed in $here"
  fi
  rm -f "$log"
  echo "$want" >"$stamp"
fi

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
