#!/usr/bin/env bash
# The web UI's node-side checks: type check, unit tests of the script logic,
# and the Playwright browser test in headless Debian Chromium. The browser
# test targets $SLUICE_UI_BASE_URL when set, else builds and starts the fake
# server (api-frontend/webui/cmd/webui-dev). Screenshots: test-artifacts/webui/.
# Run scripts/webui-build.sh first (the webui:test task depends on webui:build).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/api-frontend/webui"
[ -f static/app/index.html ] || { echo "webui:test: no bundle: run go tool task webui:build" >&2; exit 1; }

chromium="${CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$chromium" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "webui:test: installing Debian's chromium"
  (apt-get install -y chromium >/tmp/webui-apt.log 2>&1 ||
    { apt-get update >/dev/null 2>&1 && apt-get install -y chromium >/tmp/webui-apt.log 2>&1; }) ||
    echo "webui:test: could not install chromium (see /tmp/webui-apt.log); the browser test will be skipped" >&2
fi

npx --no-install tsc --noEmit -p .
node --test test/
node --test --test-concurrency=1 e2e/
