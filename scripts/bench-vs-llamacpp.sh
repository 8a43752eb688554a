#!/usr/bin/env bash
# Sluice vs llama.cpp on the same model files and machine (issue 17):
# llama-bench (decode tg32 and prefill pp128, -t THREADS) and Sluice's
# runner benchmark (BenchmarkModelFile: decode of 1 sequence with a
# 128-token prompt in the cache, and a 128-token prefill), alternated PAIRS
# times per file, then one table: wall tok/s per run (min–max over the
# pairs) and Sluice's CPU-ms per token. llama.cpp's worker threads
# busy-wait, so its CPU time per token is about THREADS × its wall time.
#
#   scripts/bench-vs-llamacpp.sh FILE.gguf...
#
# Generate files with `go run ./engine-core gen-model --shape 1b-v32k
# --format gguf-q4_k_m --out DIR` (not in the repository). Env: LLAMA_BIN
# (default /work/llama.cpp/build/bin), PAIRS (3), THREADS (2), REPS (llama-bench
# repetitions, 3), PREFILLS (Sluice prefill iterations, 2), LLAMA_ARGS (more
# llama-bench flags, e.g. "--poll 0" so its threads sleep instead of spinning
# on a shared machine), SERVE=1 to
# also run scripts/bench-real-shapes.sh (Sluice through HTTP at 1 and 16
# streams) once per file. Not part of the test suite; skips when llama.cpp
# is absent.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ $# -gt 0 ]] || { echo "usage: $0 FILE.gguf..." >&2; exit 2; }
llama="${LLAMA_BIN:-/work/llama.cpp/build/bin}"
if [[ ! -x "$llama/llama-bench" ]]; then
  echo "SKIP: no llama-bench in $llama (set LLAMA_BIN to llama.cpp's build/bin)"
  exit 0
fi
pairs="${PAIRS:-3}" threads="${THREADS:-2}" reps="${REPS:-3}"
tmp=$(mktemp -d /tmp/bench-vs-llamacpp.XXXXXX)
go test -c -o "$tmp/runner.test" ./engine-core/runner
rows="$tmp/rows.tsv"
: >"$rows"

# llama_run FILE: appends "llama.cpp tg32 pp128 - load" to rows.
llama_run() {
  local f=$1 tg pp
  tg=$("$llama/llama-bench" -m "$f" -t "$threads" ${LLAMA_ARGS:-} -p 0 -n 32 -r "$reps" -o json 2>/dev/null |
    python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)[0]["avg_ts"])')
  pp=$("$llama/llama-bench" -m "$f" -t "$threads" ${LLAMA_ARGS:-} -p 128 -n 0 -r "$reps" -o json 2>/dev/null |
    python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)[0]["avg_ts"])')
  printf '%s\tllama.cpp\t%s\t%s\t-\t%s\n' "$(basename "$(dirname "$f")")/$(basename "$f")" "$tg" "$pp" \
    "$(cut -d' ' -f1 /proc/loadavg)" >>"$rows"
}

# sluice_run FILE: appends "sluice tg pp128 cpu-ms/tok load" to rows.
sluice_run() {
  local f=$1 out
  out=$(SLUICE_BENCH_MODELS="$f" GOMAXPROCS="$threads" "$tmp/runner.test" -test.run '^$' \
    -test.bench 'ModelFile/.*/decode-seqs1$' -test.benchtime 32x 2>&1)
  out+=$'\n'$(SLUICE_BENCH_MODELS="$f" GOMAXPROCS="$threads" "$tmp/runner.test" -test.run '^$' \
    -test.bench 'ModelFile/.*/prefill128$' -test.benchtime "${PREFILLS:-2}x" 2>&1)
  python3 - "$f" "$(cut -d' ' -f1 /proc/loadavg)" "$out" >>"$rows" <<'EOF'
import re, sys, os
f, load, out = sys.argv[1], sys.argv[2], sys.argv[3]
m = {}
for line in out.splitlines():
    g = re.search(r"/(decode-seqs1|prefill128)-\d+\s.*?([\d.]+) cpu-ms/tok\s.*?([\d.]+) tok/s", line)
    if g:
        m[g.group(1)] = (float(g.group(2)), float(g.group(3)))
if "decode-seqs1" not in m or "prefill128" not in m:
    sys.exit("runner benchmark failed:\n" + out)
name = os.path.basename(os.path.dirname(f)) + "/" + os.path.basename(f)
print(f"{name}\tsluice\t{m['decode-seqs1'][1]:.1f}\t{m['prefill128'][1]:.1f}\t{m['decode-seqs1'][0]:.1f}\t{load}")
EOF
}

echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $(nproc) CPUs; threads $threads; $pairs pairs"
for f in "$@"; do
  for p in $(seq "$pairs"); do
    echo "## $f pair $p (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    llama_run "$f"
    sluice_run "$f"
  done
  if [[ "${SERVE:-}" == 1 ]]; then
    scripts/bench-real-shapes.sh "$f" "$tmp/serve-$(basename "$(dirname "$f")")" >&2
  fi
done
python3 - "$rows" <<'EOF'
import sys, collections
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
by = collections.OrderedDict()
for f, eng, tg, pp, cpu, load in rows:
    by.setdefault((f, eng), []).append((tg, pp, cpu, load))
def rng(v):
    v = [float(x) for x in v if x != "-"]
    return "-" if not v else (f"{min(v):.1f}" if min(v) == max(v) else f"{min(v):.1f}–{max(v):.1f}")
print("| file | engine | decode tok/s (tg32 / 1 seq) | prefill 128 tok/s | CPU-ms/token (decode) | load |")
print("|---|---|---|---|---|---|")
for (f, eng), v in by.items():
    print(f"| {f} | {eng} | {rng(x[0] for x in v)} | {rng(x[1] for x in v)} | {rng(x[2] for x in v)} | {rng(x[3] for x in v)} |")
EOF
echo "raw rows: $rows" >&2
