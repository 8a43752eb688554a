#!/usr/bin/env bash
# Shared helpers for the end-to-end benchmark scripts (scripts/bench-*.sh),
# sourced, not run. Every process a script starts is recorded in PIDS and
# killed by the EXIT trap, so an interrupted run leaves nothing behind.
#
#   root, BIN       repository root and the bin/ directory the scripts use
#   bench_build     go build -o bin/ ./engine-core ./api-frontend ./bench (SKIP_BUILD=1: reuse bin/)
#   bench_state     one line: UTC time, git commit (+dirty), nproc, load average
#   free_port       a free TCP port on 127.0.0.1
#   spawn LOG CMD…  start CMD in the background, output to LOG, remember its pid in $SPAWNED
#   wait_health URL SECONDS   poll URL until it answers 200
#   cpu_ticks PID…  utime+stime (clock ticks) summed over the pids, from /proc/PID/stat
#   stop_all        TERM, then KILL, every spawned process
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$root/bin"
PIDS=()
SPAWNED=
CLK_TCK="$(getconf CLK_TCK)"

bench_build() {
  if [[ "${SKIP_BUILD:-0}" == 1 && -x "$BIN/engine-core" && -x "$BIN/api-frontend" && -x "$BIN/bench" ]]; then
    return
  fi
  (cd "$root" && go build -o bin/ ./engine-core ./api-frontend ./bench)
  echo "built bin/ at commit $(bench_commit)"
}

bench_commit() {
  local c
  c="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if [[ -n "$(git -C "$root" status --porcelain 2>/dev/null)" ]]; then c="$c dirty"; fi
  echo "$c"
}

bench_state() {
  echo "state: $(date -u +%FT%TZ) commit $(bench_commit) nproc $(nproc) load $(cut -d' ' -f1-3 /proc/loadavg)"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

spawn() {
  local log="$1"
  shift
  "$@" >"$log" 2>&1 &
  SPAWNED=$!
  PIDS+=("$SPAWNED")
}

stop_all() {
  local p
  for p in "${PIDS[@]:-}"; do
    [[ -n "$p" ]] && kill -TERM "$p" 2>/dev/null || true
  done
  for _ in $(seq 50); do
    local alive=0
    for p in "${PIDS[@]:-}"; do
      [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null && alive=1
    done
    [[ $alive == 0 ]] && break
    sleep 0.1
  done
  for p in "${PIDS[@]:-}"; do
    [[ -n "$p" ]] && kill -KILL "$p" 2>/dev/null || true
  done
  for p in "${PIDS[@]:-}"; do
    [[ -n "$p" ]] && wait "$p" 2>/dev/null || true
  done
  PIDS=()
}
trap stop_all EXIT
trap 'exit 130' INT TERM

wait_health() {
  local url="$1" secs="$2" i
  for ((i = 0; i < secs * 10; i++)); do
    if curl -fsS -o /dev/null "$url" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "timed out waiting for $url" >&2
  return 1
}

cpu_ticks() {
  local total=0 p f
  for p in "$@"; do
    # Fields 14 and 15 (utime, stime) after the ")" that ends the command name.
    f="$(sed 's/^.*) //' "/proc/$p/stat")"
    read -r -a a <<<"$f"
    total=$((total + a[11] + a[12]))
  done
  echo "$total"
}
