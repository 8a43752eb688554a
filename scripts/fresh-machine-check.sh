#!/usr/bin/env bash
# Checks the README's two commands on a fresh machine, independently of CI:
# builds a minimal Debian bookworm root (debootstrap --variant=minbase plus
# ca-certificates, git, gcc, libc6-dev, make, curl, procps, python3), copies in
# this machine's Go toolchain (`go env GOROOT`) and nothing else, clones this
# repository at its current commit, and runs inside it, as root:
#   1. `go tool task run`  until /health answers 200, then stops it;
#   2. `go tool task test` to the end.
# Both start from nothing: `setup` must install every package they need. The
# only things passed in from this machine are its DNS settings and its local
# CA certificates (/usr/local/share/ca-certificates), for networks whose
# egress re-signs TLS.
#
# Usage (root; needs debootstrap, installed with apt-get when missing, and a
# reachable Debian mirror and Go module proxy):
#   nice -n 15 bash scripts/fresh-machine-check.sh [ROOT_DIR]
# Environment: MIRROR (default: the first deb.debian.org-style URI of this
# machine's apt sources, else http://deb.debian.org/debian), RUN_PORT (default
# 18000), KEEP=1 keeps the root afterwards, SKIP_TEST=1 stops after `run`,
# REUSE=1 (with KEEP=1 before) reruns in the kept root at this commit: quicker,
# but not a fresh machine (the summary says so).
# The summary goes to stdout and to ROOT_DIR.log (default
# /var/tmp/sluice-fresh.log); the full output of each command to
# ROOT_DIR.run.log and ROOT_DIR.test.log (each line of the latter stamped
# with its arrival time, so the summary lists when each of Task's steps
# started). It takes many minutes (the whole
# test suite, a CUDA toolkit download for cuda:check, Chromium): run it in the
# background on a quiet machine.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "fresh-machine-check: must run as root (debootstrap, chroot)" >&2; exit 1; }
src="$(cd "$(dirname "$0")/.." && pwd)"
root="${1:-/var/tmp/sluice-fresh}"
port="${RUN_PORT:-18000}"
summary="$root.log"
commit="$(git -C "$src" rev-parse HEAD)"
goroot="$(go env GOROOT)"
: >"$summary"
say() { echo "fresh-machine-check: $*" | tee -a "$summary"; }
now() { date +%s; }

mirror="${MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror="$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
    grep -oE 'https?://[^ ]*/debian/?' | grep -v security | head -n1 || true)"
  mirror="${mirror:-http://deb.debian.org/debian}"
fi

mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
  if [ "${KEEP:-0}" != 1 ] && [ -d "$root" ]; then rm -rf --one-file-system "$root"; fi
}
trap cleanup EXIT

t0=$(now)
say "commit $commit, Go $(go env GOVERSION) from $goroot, mirror $mirror, root $root, started $(date -u +%FT%TZ)"
if [ "${REUSE:-0}" = 1 ] && [ -d "$root/root/sluice/.git" ]; then
  # Not a fresh machine: the root kept by an earlier KEEP=1 run, with its
  # packages and Go caches, and the clone moved to this commit.
  say "REUSE=1: reusing $root (not fresh: packages and caches of an earlier run)"
  git -C "$root/root/sluice" fetch -q "$src" HEAD
  git -C "$root/root/sluice" checkout -q --detach "$commit"
else
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
rm -rf --one-file-system "$root"
debootstrap --variant=minbase --include=ca-certificates,git,gcc,libc6-dev,make,curl,procps,python3 \
  bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
  { say "debootstrap FAILED (see $root.debootstrap.log)"; exit 1; }
say "debootstrap done in $(($(now) - t0)) s"

mkdir -p "$root/usr/local"
cp -a "$goroot" "$root/usr/local/go"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# Local CA certificates (a site's TLS-intercepting egress proxy, say) are the
# network's, not the machine's: give them to the root too.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null 2>&1
fi
git clone -q "$src" "$root/root/sluice"
git -C "$root/root/sluice" checkout -q --detach "$commit"
fi
for m in proc sys dev dev/pts; do
  mkdir -p "$root/$m"
  case $m in
    proc) mount -t proc proc "$root/proc" ;;
    sys) mount -t sysfs sys "$root/sys" ;;
    *) mount --bind "/$m" "$root/$m" ;;
  esac
  mounted+=("$root/$m")
done
mkdir -p "$root/dev/shm" && mount -t tmpfs shm "$root/dev/shm" && mounted+=("$root/dev/shm")

# inroot runs a command in the root as a fresh login would: only Go added to PATH.
inroot() {
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
    PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -c "cd /root/sluice && $1"
}

# 1. go tool task run, until /health answers.
t1=$(now)
inroot "setsid bash -c 'echo \$\$ >/tmp/run.pgid; exec go tool task run PORT=$port'" >"$root.run.log" 2>&1 &
runpid=$!
health=""
while kill -0 "$runpid" 2>/dev/null; do
  if curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1; then health=ok; break; fi
  if [ $(($(now) - t1)) -gt 3600 ]; then break; fi
  sleep 2
done
if [ "$health" = ok ]; then
  ui="$(curl -fs "http://127.0.0.1:$port/ui/api/config" 2>/dev/null || echo '{}')"
  say "run: PASS: /health answered 200 after $(($(now) - t1)) s (web UI config: $ui)"
else
  say "run: FAILED after $(($(now) - t1)) s; last lines of $root.run.log:"
  tail -n 15 "$root.run.log" | tee -a "$summary"
fi
# Stop the server: the process group setsid gave `go tool task run` (the
# task, api-frontend and the engine-core it spawned).
if [ -s "$root/tmp/run.pgid" ]; then kill -TERM -- "-$(cat "$root/tmp/run.pgid")" 2>/dev/null || true; fi
for _ in $(seq 1 30); do kill -0 "$runpid" 2>/dev/null || break; sleep 1; done
kill -KILL "$runpid" 2>/dev/null || true
wait "$runpid" 2>/dev/null || true
[ "$health" = ok ] || exit 1
[ "${SKIP_TEST:-0}" = 1 ] && { say "test: skipped (SKIP_TEST=1); total $(($(now) - t0)) s"; exit 0; }

# 2. go tool task test, each output line stamped with the time it arrived
# (HH:MM:SS UTC), so that each step's duration can be read from the log.
stamp() { while IFS= read -r l; do TZ=UTC printf '%(%T)T %s\n' -1 "$l"; done; }
t2=$(now)
set +e
inroot "go tool task test" 2>&1 | stamp >"$root.test.log"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" = 0 ]; then
  say "test: PASS in $(($(now) - t2)) s"
else
  say "test: FAILED (exit $rc) after $(($(now) - t2)) s; last lines of $root.test.log:"
  tail -n 25 "$root.test.log" | tee -a "$summary"
fi
# When each of Task's commands started (its "task: [name] command" lines).
say "test steps (start time, command):"
grep -E '^[0-9:]{8} task: \[' "$root.test.log" | cut -c1-160 | tee -a "$summary" || true
say "skips reported by the test run: $(grep -c -E '^(--- SKIP|.*SKIP)' "$root.test.log" || true) lines (grep SKIP $root.test.log)"
say "total $(($(now) - t0)) s, finished $(date -u +%FT%TZ)"
exit "$rc"
