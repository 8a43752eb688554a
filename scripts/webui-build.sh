#!/usr/bin/env bash
# Builds the web UI bundle (api-frontend/webui/static/app/), which the next
# `go build ./api-frontend` embeds. Needs node and npm; dependencies are the
# exact versions in api-frontend/webui/package-lock.json.
set -euo pipefail
cd "$(dirname "$0")/../api-frontend/webui"
command -v npm >/dev/null || { echo "webui:build: npm not found (install Node.js 20+)" >&2; exit 1; }
# npm ci only when the lock file changed since the last install.
if [ ! -f node_modules/.package-lock.json ] || ! cmp -s package-lock.json node_modules/.sluice-lock; then
  npm ci --no-audit --no-fund
  cp package-lock.json node_modules/.sluice-lock
fi
node build.mjs
