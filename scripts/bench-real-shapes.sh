#!/usr/bin/env bash
# End-to-end figures for one model file at a real shape (issue 17): engine
# RSS after load (VmRSS from /proc, and smaps_rollup's anonymous and
# file-backed parts, next to the weights, KV cache and scratch the engine
# logs) and after each run (then the engine's own memory line at stop),
# with `bench serve` through HTTP at 1 and 16 streams
# (128-token random prompts, 32 output tokens, --ignore-eos). Decode rate =
# concurrency × 1000 / mean TPOT.
#
#   scripts/bench-real-shapes.sh MODEL.gguf [OUT_DIR]
#
# Generate models with `bin/engine-core gen-model --shape 1b-v32k --format
# gguf-q4_k_m --out DIR` (see docs/bench/real-shapes.md). Env: SKIP_BUILD=1
# reuses bin/; PROMPTS1 / PROMPTS16 set the request counts (4 / 32);
# MAX_MODEL_LEN (512) and KV_MEM (bytes; default: the engine's default).
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
model="${1:?usage: $0 MODEL.gguf [OUT_DIR]}"
out="${2:-$(mktemp -d /tmp/bench-real-shapes.XXXXXX)}"
mkdir -p "$out"
bench_build
bench_state | tee "$out/state.txt"
sock="ipc://$out/engine.sock"
extra=()
[[ -n "${KV_MEM:-}" ]] && extra+=(--kv-cache-memory "$KV_MEM")
t0=$(date +%s.%N)
spawn "$out/engine.log" "$BIN/engine-core" --model "$model" --listen "$sock" --max-num-seqs 16 \
  --max-model-len "${MAX_MODEL_LEN:-512}" --log-format console "${extra[@]}"
epid=$SPAWNED
for _ in $(seq 6000); do
  grep -q "engine ready" "$out/engine.log" && break
  kill -0 "$epid" 2>/dev/null || { cat "$out/engine.log"; exit 1; }
  sleep 0.1
done
t1=$(date +%s.%N)
# rollup: the engine's resident MiB, anonymous and file-backed (smaps_rollup)
rollup() {
  awk '/^Rss:/ {r=$2} /^Anonymous:/ {a=$2} END {printf "RSS %d MiB (anonymous %d, file-backed %d)", r/1024, a/1024, (r-a)/1024}' "/proc/$epid/smaps_rollup"
}
rss_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$epid/status")
echo "load: $(python3 -c "print(f'{$t1-$t0:.1f}')") s; engine VmRSS after load: $((rss_kb / 1024)) MiB; file $(($(stat -c %s "$model") >> 20)) MiB; $(rollup)" | tee "$out/load.txt"
grep -E "model loaded|\"memory\"|memory.*after load" "$out/engine.log" | tee -a "$out/load.txt"
port=$(free_port)
spawn "$out/frontend.log" "$BIN/api-frontend" --model "$model" --engine "$sock" --port "$port"
wait_health "http://127.0.0.1:$port/health" 60
for c in 1 16; do
  n="${PROMPTS1:-4}"
  [[ $c == 16 ]] && n="${PROMPTS16:-32}"
  "$BIN/bench" serve --base-url "http://127.0.0.1:$port" --tokenizer "$model" --dataset-name random \
    --random-input-len 128 --random-output-len 32 --ignore-eos --num-prompts "$n" --max-concurrency "$c" \
    --ready-check-timeout-sec 0 --disable-tqdm --percentile-metrics ttft,tpot,itl --metric-percentiles 50,99 \
    --result-json "$out/c$c.json" >"$out/c$c.txt" 2>&1 || { cat "$out/c$c.txt"; exit 1; }
  python3 - "$out/c$c.json" "$c" <<'EOF' | tee -a "$out/summary.txt"
import json, sys
r = json.load(open(sys.argv[1])); c = int(sys.argv[2])
g = lambda *ks: next((r[k] for k in ks if k in r), float("nan"))
tpot, ttft = g("mean_tpot_ms"), g("mean_ttft_ms")
print(f"concurrency {c}: mean TPOT {tpot:.1f} ms -> decode {c*1000/tpot:.1f} tok/s; mean TTFT {ttft:.0f} ms; "
      f"output throughput {g('output_throughput'):.1f} tok/s; completed {g('completed')}")
EOF
  echo "engine after the $c-stream run: $(rollup)" | tee -a "$out/summary.txt"
done
rss_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$epid/status")
echo "engine VmRSS after the runs: $((rss_kb / 1024)) MiB" | tee -a "$out/summary.txt"
# stop the engine: it logs its Go memory classes "at stop"
kill -TERM "$epid"
for _ in $(seq 100); do kill -0 "$epid" 2>/dev/null || break; sleep 0.1; done
grep "at stop" "$out/engine.log" | tee -a "$out/summary.txt" || true
bench_state | tee -a "$out/summary.txt"
echo "results in $out"
