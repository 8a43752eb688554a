#!/usr/bin/env bash
# Real model on the CPU (issues 5 and 8): one engine-core --executor cpu with
# a generated random-weight model (stories15M or stories110M shape; speed
# depends only on shape) behind one api-frontend, and `bench sweep` over
# concurrencies 1..32 with short prompts (128 in / 64 out, ignore_eos). Writes
# the sweep's table, JSON, CSV and SVG plots to $OUT/<model>/ and, with
# PLOTS=DIR, copies the SVGs to DIR/<model>-*.svg.
#
#   scripts/bench-cpu-sweep.sh                    # demo-15m and demo-110m
#   MODELS=demo-110m CONCURRENCIES=1,8 scripts/bench-cpu-sweep.sh
#
# Environment: MODELS ("demo-15m demo-110m"; also demo-110m-q8_0 for the GGUF
# Q8_0 variant), CONCURRENCIES (1,2,4,8,16,32), INPUT_LEN (128), OUTPUT_LEN
# (64), PER_CONC (prompts per point = PER_CONC × concurrency, default 4),
# MIN_PROMPTS (at least this many prompts per point, default 8), THREADS
# (engine --threads, 0: all cores), OUT (/tmp/sluice-bench-cpu), PLOTS
# (unset: do not copy), SKIP_BUILD=1 to reuse bin/.
source "$(dirname "$0")/bench-lib.sh"

MODELS="${MODELS:-demo-15m demo-110m}"
CONCURRENCIES="${CONCURRENCIES:-1,2,4,8,16,32}"
INPUT_LEN="${INPUT_LEN:-128}"
OUTPUT_LEN="${OUTPUT_LEN:-64}"
PER_CONC="${PER_CONC:-4}"
MIN_PROMPTS="${MIN_PROMPTS:-8}"
THREADS="${THREADS:-0}"
OUT="${OUT:-/tmp/sluice-bench-cpu}"
PLOTS="${PLOTS:-}"
mkdir -p "$OUT"
bench_build
cache="${XDG_CACHE_HOME:-$HOME/.cache}/sluice/models"

for m in $MODELS; do
  case "$m" in
    demo-15m) dir="$cache/demo-15m-0" shape=15m format=hf path="$dir" ;;
    demo-110m) dir="$cache/demo-110m-0" shape=110m format=hf path="$dir" ;;
    demo-110m-q8_0) dir="$cache/demo-110m-0-gguf-q8_0" shape=110m format=gguf-q8_0 path="$dir/model.gguf" ;;
    *) echo "unknown model $m (demo-15m, demo-110m, demo-110m-q8_0)" >&2; exit 2 ;;
  esac
  if [[ ! -e "$path" ]]; then
    "$BIN/engine-core" gen-model --shape "$shape" --format "$format" --out "$dir"
  fi
  echo "--- $m ($path)"
  bench_state
  sock="ipc://$OUT/engine-$m.sock"
  port="$(free_port)"
  spawn "$OUT/$m-engine.log" "$BIN/engine-core" --model "$path" --executor cpu --threads "$THREADS" \
    --listen "$sock" --served-model-name "$m" --log-format console
  spawn "$OUT/$m-fe.log" "$BIN/api-frontend" --model "$path" --served-model-name "$m" --engine "$sock" \
    --host 127.0.0.1 --port "$port" --log-format json
  wait_health "http://127.0.0.1:$port/health" 300
  rm -rf "${OUT:?}/$m"
  # Warm-up (not measured): fault the weights in and size the buffers.
  "$BIN/bench" serve --base-url "http://127.0.0.1:$port" --model "$m" --tokenizer "$dir" --num-prompts 2 \
    --max-concurrency 2 --random-input-len "$INPUT_LEN" --random-output-len 8 --ignore-eos --disable-tqdm \
    --ready-check-timeout-sec 0 --seed 99 >"$OUT/$m-warmup.log" 2>&1
  start=$(date +%s)
  "$BIN/bench" sweep --base-url "http://127.0.0.1:$port" --model "$m" --tokenizer "$dir" \
    --concurrencies "$CONCURRENCIES" --prompts-per-concurrency "$PER_CONC" --num-prompts "$MIN_PROMPTS" \
    --random-input-len "$INPUT_LEN" --random-output-len "$OUTPUT_LEN" --ignore-eos --disable-tqdm \
    --ready-check-timeout-sec 0 --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99 \
    --label "$m" --output-dir "$OUT/$m" 2>&1 | tee "$OUT/$m-sweep.log" | grep -v '^Starting\|^Traffic\|^Burstiness' || true
  echo "sweep took $(($(date +%s) - start)) s"
  # Decode rate = concurrency x 1000 / TPOT (ms): generation speed with the
  # prefill steps left out, the figure llama-batched-bench reports as S_TG.
  python3 - "$OUT/$m/sweep.csv" "$m" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print(f"summary {sys.argv[2]}: conc | out tok/s | decode tok/s (conc/TPOT mean) | TTFT p50/p99 ms | TPOT p50/p99 ms | ITL p50/p99 ms | failed")
for r in rows:
    c = int(r["max_concurrency"])
    dec = c * 1000 / float(r["tpot_mean_ms"]) if float(r["tpot_mean_ms"]) > 0 else float("nan")
    print(f"| {c} | {float(r['output_throughput']):.1f} | {dec:.1f} | {float(r['ttft_p50_ms']):.0f} / {float(r['ttft_p99_ms']):.0f} | "
          f"{float(r['tpot_p50_ms']):.1f} / {float(r['tpot_p99_ms']):.1f} | {float(r['itl_p50_ms']):.1f} / {float(r['itl_p99_ms']):.1f} | {r['failed']} |")
EOF
  bench_state
  stop_all
  if [[ -n "$PLOTS" ]]; then
    mkdir -p "$PLOTS"
    for f in "$OUT/$m"/*.svg; do
      [[ -e "$f" ]] && cp "$f" "$PLOTS/$m-$(basename "$f")"
    done
  fi
  ls "$OUT/$m"
done
