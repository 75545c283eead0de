# Sourced by the checkers that run on Node.js (tests/deploy/run.sh, tests/docs/envoy/run.sh).
# npm_packages_ready PROJECT LOCK: checks that Node.js 18+ (Debian 12's) and npm are here, then installs
# PROJECT's packages (PROJECT/package.json with the package-lock.json LOCK) into PROJECT/node_modules with
# `npm ci`: once, and again whenever LOCK changes (a stamp file holds the hash of the lock that was installed). Exits 2 on failure.

npm_packages_ready() {
  local project=$1 lock=$2 me
  me=$(basename "$(dirname "${BASH_SOURCE[1]}")")/$(basename "${BASH_SOURCE[1]}")
  command -v node >/dev/null || { echo "$me: node not found: install Node.js 18 or later (scripts/setup)" >&2; exit 2; }
  command -v npm >/dev/null || { echo "$me: npm not found: install npm" >&2; exit 2; }
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  ((major >= 18)) || { echo "$me: Node.js $(node --version) is too old: 18 or later is needed" >&2; exit 2; }
  local stamp=$project/node_modules/.sluice-package-lock.sha256 want
  want=$(sha256sum "$lock" | cut -d' ' -f1)
  if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then return 0; fi
  echo "$me: installing the npm packages into $project/node_modules (npm ci)"
  local log start=$SECONDS
  log=$(mktemp)
  if ! (cd "$project" && npm ci --no-audit --no-fund --loglevel=error >"$log" 2>&1); then
    cat "$log" >&2
    rm -f "$log"
    echo "$me: npm ci failed in $project" >&2
    exit 2
  fi
  rm -f "$log"
  echo "$want" >"$stamp"
  echo "$me: installed in $((SECONDS - start)) s"
}
