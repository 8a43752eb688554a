#!/usr/bin/env bash
# Verifies deploy/systemd/ with systemd-analyze verify: the units are copied to a
# scratch directory with ExecStart pointing at stand-in binaries (verify checks that
# they exist and are executable) and the environment file at the repository's copy.
# Any diagnostic fails the check.
set -euo pipefail
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "verify-systemd: SKIP: systemd-analyze not installed (Debian package systemd)"; exit 0
fi
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
for b in engine-core api-frontend; do printf '#!/bin/sh\n' > "$tmp/bin/$b"; chmod +x "$tmp/bin/$b"; done
cp "$root"/deploy/systemd/*.service "$root"/deploy/systemd/*.target "$tmp/"
sed -i "s|/usr/local/bin|$tmp/bin|g; s|/etc/sluice/sluice.env|$root/deploy/systemd/sluice.env|g" "$tmp"/*.service
cd "$tmp"
out=$(systemd-analyze verify --man=no ./sluice-engine.service ./sluice-frontend@1.service ./sluice-frontend@2.service ./sluice.target 2>&1 || true)
if [ -n "$out" ]; then echo "$out"; echo "verify-systemd: FAILED"; exit 1; fi
echo "verify-systemd: sluice-engine.service, sluice-frontend@.service, sluice.target verified"
