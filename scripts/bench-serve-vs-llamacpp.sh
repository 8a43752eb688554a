#!/usr/bin/env bash
# Sluice vs llama-server through HTTP on the same GGUF file (issue 20's
# side by side for the MoE models): each engine in turn is started alone,
# `bench serve` sends random prompts built with the file's own tokenizer to
# /v1/completions at 1 and then 16 concurrent streams (--ignore-eos), and
# the script records the server's RSS (smaps_rollup: anonymous and
# file-backed) after load and after each run, and its CPU seconds per run.
# Decode rate = concurrency × 1000 / mean TPOT.
#
#   scripts/bench-serve-vs-llamacpp.sh MODEL.gguf [OUT_DIR]
#
# Env: LLAMA_BIN (directory holding llama-server; default
# /work/llama.cpp/build/bin), THREADS (2: both engines' compute threads; on
# a loaded machine use 1, since llama.cpp's threads spin at every op's
# barrier and its rate collapses when the partner thread is descheduled),
# INPUT_LEN (128), OUTPUT_LEN (32),
# CONCURRENCIES ("1 16": the stream counts, in order; each sends as many
# prompts as streams, 1 stream PROMPTS1), PROMPTS1 (2), PROMPTS16 (16),
# ENGINES ("llama.cpp sluice": the order), FRONTEND_ARGS (extra api-frontend
# flags, e.g. --engine-liveness-timeout 30s), ENGINE_ARGS (extra engine-core
# flags, e.g. --cpu-futex-sleep),
# SKIP_BUILD=1 reuses bin/, LOCK (a file to flock around each engine's run,
# e.g. /tmp/gptoss.lock so that one multi-GB model is resident at a time).
# Not part of the test suite; skips when llama-server is absent.
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
model="${1:?usage: $0 MODEL.gguf [OUT_DIR]}"
out="${2:-$(mktemp -d /tmp/bench-serve-vs-llamacpp.XXXXXX)}"
mkdir -p "$out"
llama="${LLAMA_BIN:-/work/llama.cpp/build/bin}"
if [[ ! -x "$llama/llama-server" ]]; then
  echo "SKIP: no llama-server in $llama (set LLAMA_BIN to llama.cpp's build/bin)"
  exit 0
fi
threads="${THREADS:-2}" in="${INPUT_LEN:-128}" outlen="${OUTPUT_LEN:-32}"
ctx=$(((in + outlen + 64) * 16))
bench_build
bench_state | tee "$out/state.txt"

# rollup PID: resident MiB, anonymous and file-backed
rollup() {
  awk '/^Rss:/ {r=$2} /^Anonymous:/ {a=$2} END {printf "RSS %d MiB (anonymous %d, file-backed %d)", r/1024, a/1024, (r-a)/1024}' "/proc/$1/smaps_rollup"
}

# run_engine NAME: starts the engine(s), runs both concurrencies, stops them.
run_engine() {
  local name=$1 pid port t0 t1 c n ticks
  port=$(free_port)
  t0=$(date +%s.%N)
  if [[ $name == llama.cpp ]]; then
    spawn "$out/$name.server.log" "$llama/llama-server" -m "$model" -t "$threads" -tb "$threads" -np 16 -c "$ctx" \
      --host 127.0.0.1 --port "$port" --no-webui
    pid=$SPAWNED
    wait_health "http://127.0.0.1:$port/health" 900
  else
    local sock="ipc://$out/engine.sock"
    spawn "$out/$name.engine.log" "$BIN/engine-core" --model "$model" --executor cpu --threads "$threads" --listen "$sock" \
      --max-num-seqs 16 --max-model-len $((in + outlen + 64)) --log-format console ${ENGINE_ARGS:-}
    pid=$SPAWNED
    for _ in $(seq 9000); do
      grep -q "engine ready" "$out/$name.engine.log" && break
      kill -0 "$pid" 2>/dev/null || { cat "$out/$name.engine.log"; exit 1; }
      sleep 0.1
    done
    # shellcheck disable=SC2086 # FRONTEND_ARGS is a list of flags
    spawn "$out/$name.frontend.log" "$BIN/api-frontend" --model "$model" --engine "$sock" --port "$port" ${FRONTEND_ARGS:-}
    wait_health "http://127.0.0.1:$port/health" 120
  fi
  t1=$(date +%s.%N)
  echo "$name: ready in $(python3 -c "print(f'{$t1-$t0:.1f}')") s; $(rollup "$pid")" | tee -a "$out/summary.txt"
  for c in ${CONCURRENCIES:-1 16}; do
    n=$c
    [[ $c == 1 ]] && n="${PROMPTS1:-2}"
    [[ $c == 16 ]] && n="${PROMPTS16:-16}"
    ticks=$(cpu_ticks "$pid")
    "$BIN/bench" serve --base-url "http://127.0.0.1:$port" --endpoint /v1/completions --tokenizer "$model" \
      --dataset-name random --random-input-len "$in" --random-output-len "$outlen" --ignore-eos \
      --num-prompts "$n" --max-concurrency "$c" --ready-check-timeout-sec 0 --disable-tqdm \
      --percentile-metrics ttft,tpot,itl --metric-percentiles 50,99 \
      --result-json "$out/$name.c$c.json" >"$out/$name.c$c.txt" 2>&1 || { cat "$out/$name.c$c.txt"; exit 1; }
    ticks=$(($(cpu_ticks "$pid") - ticks))
    python3 - "$out/$name.c$c.json" "$c" "$name" "$ticks" "$CLK_TCK" "$(cut -d' ' -f1 /proc/loadavg)" <<'EOF' | tee -a "$out/summary.txt"
import json, sys
r = json.load(open(sys.argv[1])); c = int(sys.argv[2]); name = sys.argv[3]
cpu = int(sys.argv[4]) / int(sys.argv[5])
g = lambda *ks: next((r[k] for k in ks if k in r), float("nan"))
tpot, ttft = g("mean_tpot_ms"), g("mean_ttft_ms")
print(f"{name} concurrency {c}: mean TPOT {tpot:.1f} ms -> decode {c*1000/tpot:.2f} tok/s; mean TTFT {ttft:.0f} ms; "
      f"output throughput {g('output_throughput'):.2f} tok/s; completed {g('completed')}; "
      f"input tokens {g('total_input_tokens')}; server CPU {cpu:.1f} s; load {sys.argv[6]}")
EOF
    echo "$name after the $c-stream run: $(rollup "$pid")" | tee -a "$out/summary.txt"
  done
  stop_all
}

for e in ${ENGINES:-llama.cpp sluice}; do
  if [[ -n "${LOCK:-}" ]]; then
    exec {lockfd}>"$LOCK"
    flock "$lockfd"
    run_engine "$e"
    exec {lockfd}>&-
  else
    run_engine "$e"
  fi
done
bench_state | tee -a "$out/summary.txt"
echo "results in $out"
