#!/usr/bin/env bash
# Checks the Kubernetes manifests in deploy/kubernetes/: installs the npm packages the checker needs (once, and
# again whenever package-lock.json changes), runs check_manifests.mjs on the repository's manifests, docs/reference/settings.md and
# Dockerfile, then selftest.mjs (broken copies in a temporary directory must each be caught).
#
#   tests/deploy/run.sh [--no-selftest]
#
# Needs Node.js 18+ (Debian 12's nodejs; scripts/setup installs it when node is missing) and npm, nothing else.
# SLUICE_NPM_DIR: where the packages go (default tests/deploy/node_modules);
# a directory not named node_modules gets a node_modules inside it, next to a copy of package.json and
# package-lock.json. Exit status: 0 when every check passed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
selftest=1
for arg in "$@"; do
  case $arg in
    --no-selftest) selftest=0 ;;
    -h | --help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

die() { echo "run.sh: $*" >&2; exit 2; }
# shellcheck source=../support/npm_packages.sh
source "$here/../support/npm_packages.sh"

# Where the packages live: $npm_dir is a node_modules directory inside the npm project directory $project.
npm_dir=${SLUICE_NPM_DIR:-$here/node_modules}
mkdir -p "$npm_dir"
npm_dir=$(cd "$npm_dir" && pwd)
if [[ $(basename "$npm_dir") != node_modules ]]; then
  npm_dir=$npm_dir/node_modules
fi
project=$(dirname "$npm_dir")
if [[ $project != "$here" ]]; then
  # A project directory of our own: never overwrite someone else's package.json.
  for f in package.json package-lock.json; do
    if [[ -e $project/$f && ! -e $project/.sluice-deploy-checks ]] && ! cmp -s "$here/$f" "$project/$f"; then
      die "$project/$f exists and is not ours: choose another SLUICE_NPM_DIR"
    fi
  done
  touch "$project/.sluice-deploy-checks"
  cp "$here/package.json" "$here/package-lock.json" "$project/"
fi

npm_packages_ready "$project" "$here/package-lock.json"

export SLUICE_NPM_DIR=$npm_dir
status=0
node "$here/check_manifests.mjs" \
  --manifests "$repo/deploy/kubernetes" --settings "$repo/docs/reference/settings.md" --dockerfile "$repo/Dockerfile" || status=$?
if ((selftest)); then
  node "$here/selftest.mjs" || status=$?
fi
exit "$status"
