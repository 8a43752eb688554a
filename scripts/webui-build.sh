#!/usr/bin/env bash
# Builds the web UI bundle (api-frontend/webui/static/app/), which the next
# `go build ./api-frontend` embeds. Needs node (18 or later, Debian bookworm's
# is enough) and npm; dependencies are the exact versions in
# api-frontend/webui/package-lock.json. Without npm it builds nothing and says
# so: the server then serves /ui/ without the bundle (a page saying how to
# build it), and webui:test fails for want of the bundle. Set
# SLUICE_WEBUI_REQUIRED=1 to fail instead.
set -euo pipefail
cd "$(dirname "$0")/../api-frontend/webui"
if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
  if [ "${SLUICE_WEBUI_REQUIRED:-0}" = 1 ]; then
    echo "webui:build: npm not found (install Node.js 18+ and npm: go tool task setup)" >&2
    exit 1
  fi
  echo "webui:build: SKIP: npm not found, building without the web UI bundle (go tool task setup installs Node.js and npm)" >&2
  exit 0
fi
# npm ci only when the lock file changed since the last install.
if [ ! -f node_modules/.package-lock.json ] || ! cmp -s package-lock.json node_modules/.sluice-lock; then
  npm ci --no-audit --no-fund
  cp package-lock.json node_modules/.sluice-lock
fi
node build.mjs
