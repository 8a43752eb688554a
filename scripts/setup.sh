#!/usr/bin/env bash
# Installs the system packages Sluice needs when they are missing:
#   libzmq3-dev + pkg-config  (ZeroMQ, used through cgo by github.com/pebbe/zmq4)
#   python3-jinja2            (the reference renderer the chat-template tests compare against)
# Uses apt-get (Debian/Ubuntu). Without root it uses sudo when available; otherwise it
# prints the command to run and fails.
set -euo pipefail
need=()
pkg-config --exists libzmq 2>/dev/null || need+=(libzmq3-dev pkg-config)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
python3 -c 'import jinja2' 2>/dev/null || need+=(python3-jinja2)
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
  echo "setup: apt-get not found. Install ZeroMQ's development files (libzmq), pkg-config and Python's jinja2 with your package manager." >&2
  exit 1
fi
install() {
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq &&
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${need[@]}"
}
install || { echo "setup: apt-get failed; retrying once" >&2; sleep 5; install; }
echo "setup: done"
