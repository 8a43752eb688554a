#!/usr/bin/env bash
# Runs the reliability suite (internal/reliability) against freshly built
# engine-core and api-frontend binaries. With LONG=1 (the default for
# `go tool task reliability`) the soak runs 10 minutes at 256 streams; the
# measured figures are appended to $FIGURES (tab-separated: test, figure,
# value) and printed at the end.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
LONG="${LONG:-1}"
FIGURES="${FIGURES:-$root/test-artifacts/reliability-figures.tsv}"
mkdir -p "$(dirname "$FIGURES")"
: > "$FIGURES"
timeout="${TIMEOUT:-30m}"
log=/tmp/sluice-reliability.log
status=0
SLUICE_RELIABILITY_LONG="$LONG" SLUICE_RELIABILITY_FIGURES="$FIGURES" \
  go test -count=1 -v -timeout "$timeout" ./internal/reliability "$@" >"$log" 2>&1 || status=$?
grep -E '^(--- |PASS|FAIL|ok )|BUG:|soak ' "$log" || true
echo "full log: $log"
echo "figures ($FIGURES):"
column -t -s $'\t' "$FIGURES" 2>/dev/null || cat "$FIGURES"
exit "$status"
