#!/usr/bin/env bash
# Checks the Prometheus alerting rules in etc/prometheus/: `promtool check rules` (syntax, PromQL, templates) on
# alerts.yaml, then `promtool test rules` on alerts_test.yaml (every alert firing and not firing on made-up
# series). promtool's own output is shown as it is. Needs Debian's prometheus package (scripts/setup installs it).
# Exit status: 0 when both passed.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
promtool=$(command -v promtool || true)
if [[ -z $promtool ]]; then
  echo "run.sh: promtool not found: install Debian's prometheus package (scripts/setup)" >&2
  exit 2
fi

status=0
"$promtool" check rules "$repo/etc/prometheus/alerts.yaml" || status=1
"$promtool" test rules "$repo/etc/prometheus/alerts_test.yaml" || status=1
exit "$status"
