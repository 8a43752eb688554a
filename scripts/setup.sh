#!/usr/bin/env bash
# Installs, from Debian's own packages, the system packages Sluice's build,
# `go tool task run` and `go tool task test` need, when missing:
#   libzmq3-dev + pkg-config  (ZeroMQ, used through cgo by github.com/pebbe/zmq4)
#   python3-jinja2            (the reference renderer the chat-template tests compare against)
#   g++                       (nvcc's host compiler in cuda:check)
#   nodejs + npm              (the web UI bundle and its tests; Debian bookworm's Node 18 is enough)
#   chromium                  (the web UI's headless browser test)
#   systemd                   (systemd-analyze, for deploy:check's unit verification)
# Uses apt-get (Debian/Ubuntu). Without root it uses sudo when available; otherwise it
# prints the command to run and fails. `setup.sh --check` only reports what is missing
# (exit status 1 when something is).
set -euo pipefail
need=()
pkg-config --exists libzmq 2>/dev/null || need+=(libzmq3-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
python3 -c 'import jinja2' 2>/dev/null || need+=(python3-jinja2)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || need+=(chromium fonts-liberation)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
if [ "${1:-}" = --check ]; then
  [ ${#need[@]} -eq 0 ] && exit 0
  echo "setup: missing ${need[*]}" >&2
  exit 1
fi
[ ${#need[@]} -eq 0 ] && exit 0
echo "setup: installing ${need[*]} with apt-get (needed to build and test Sluice)"
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "setup: not root and no sudo. Ask an administrator to run:" >&2
    echo "  apt-get install -y ${need[*]}" >&2
    exit 1
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: apt-get not found. Install ZeroMQ's development files (libzmq), pkg-config, Python's jinja2, g++, Node.js 18+ with npm, Chromium and systemd-analyze with your package manager." >&2
  exit 1
fi
install() {
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq &&
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}"
}
install || { echo "setup: apt-get failed; retrying once" >&2; sleep 5; install; }
echo "setup: done"
