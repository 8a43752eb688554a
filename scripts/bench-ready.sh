#!/usr/bin/env bash
# Engine ready time: starts bin/engine-core on each model file in turn
# (alternating with a second build's directory when BASE is set, so that
# old and new code run in the same period), waits for its "engine ready"
# log line and prints the wall time from the start, the process's CPU
# seconds (user, system) and its resident set (smaps_rollup) at that
# moment, then stops it.
#
#   scripts/bench-ready.sh MODEL… 
#
# Env: BASE (a directory holding another engine-core, e.g. main's, run
# before each of ours), ROUNDS (3), THREADS (2), ENGINE_ARGS (extra
# engine-core flags), SKIP_BUILD=1 reuses bin/, LOCK (a file to flock
# around each start, e.g. /tmp/bigmem.lock for multi-GB files).
# Not part of the test suite.
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
(($# > 0)) || { echo "usage: $0 MODEL…" >&2; exit 2; }
bench_build
bench_state
out="$(mktemp -d /tmp/bench-ready.XXXXXX)"

# ready_once BIN MODEL: one start, one line of figures.
ready_once() {
  local bin=$1 model=$2 log t0 t1 pid ut st rss
  log="$out/engine.log"
  : >"$log"
  [[ -n "${LOCK:-}" ]] && { exec {lockfd}>"$LOCK"; flock "$lockfd"; }
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086 # ENGINE_ARGS is a list of flags
  spawn "$log" "$bin/engine-core" --model "$model" --executor cpu --threads "${THREADS:-2}" \
    --listen "ipc://$out/engine.sock" --max-num-seqs 16 --max-model-len 224 --log-format console ${ENGINE_ARGS:-}
  pid=$SPAWNED
  until grep -q "engine ready" "$log"; do
    kill -0 "$pid" 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.01
  done
  t1=$(date +%s.%N)
  read -r ut st < <(sed 's/^.*) //' "/proc/$pid/stat" | awk '{print $12, $13}')
  rss=$(awk '/^Rss:/ {print int($2/1024)}' "/proc/$pid/smaps_rollup")
  stop_all
  [[ -n "${LOCK:-}" ]] && exec {lockfd}>&-
  python3 -c "print(f'ready {$t1-$t0:.2f} s, CPU {($ut+$st)/$CLK_TCK:.2f} s (user {$ut/$CLK_TCK:.2f}, sys {$st/$CLK_TCK:.2f}), RSS $rss MiB, load $(cut -d' ' -f1 /proc/loadavg)')"
}

for model in "$@"; do
  for ((r = 0; r < ${ROUNDS:-3}; r++)); do
    [[ -n "${BASE:-}" ]] && echo "$model base: $(ready_once "$BASE" "$model")"
    echo "$model new:  $(ready_once "$BIN" "$model")"
  done
done
rm -rf "$out"
