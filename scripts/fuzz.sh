#!/usr/bin/env bash
# Runs every Fuzz* target in the module for $FUZZTIME (default 3s) each.
set -euo pipefail
FUZZTIME=${FUZZTIME:-3s}
n=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u || true)
  for t in $targets; do
    echo "fuzz: $pkg $t ($FUZZTIME)"
    go test -run '^$' -fuzz "^${t}\$" -fuzztime "$FUZZTIME" "$pkg" > /tmp/sluice-fuzz.log 2>&1 || { cat /tmp/sluice-fuzz.log; exit 1; }
    n=$((n+1))
  done
done
echo "fuzz: $n targets passed"
