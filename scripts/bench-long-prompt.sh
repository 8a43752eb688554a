#!/usr/bin/env bash
# A long prompt next to running streams (issue 17 item 5): engine-core
# (CPU) and api-frontend on MODEL.gguf; scripts/long-prompt-gap.py starts
# STREAMS (4) streams, sends one LONG (2000)-token prompt once they decode,
# and reports the streams' inter-token gaps (max, p99) while it prefills,
# its TTFT and the prefill rate; the engine's CPU seconds over the run.
#
#   scripts/bench-long-prompt.sh MODEL.gguf [OUT_DIR]
#
# Env: BIN (directory of engine-core and api-frontend; default the tree's
# bin/, built unless SKIP_BUILD=1), THREADS (2), STREAMS (4), LONG (2000),
# COUNT (1: new prompts of LONG tokens sent together, e.g. COUNT=8 LONG=200 for a burst),
# ENGINE_ARGS (extra engine-core flags, e.g. --long-prefill-token-threshold 0).
# Not part of the test suite.
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
model="${1:?usage: $0 MODEL.gguf [OUT_DIR]}"
out="${2:-$(mktemp -d /tmp/bench-long-prompt.XXXXXX)}"
mkdir -p "$out"
long="${LONG:-2000}" streams="${STREAMS:-4}"
bench_build
port=$(free_port)
sock="ipc://$out/engine.sock"
# shellcheck disable=SC2086 # ENGINE_ARGS is a list of flags
spawn "$out/engine.log" "$BIN/engine-core" --model "$model" --executor cpu --threads "${THREADS:-2}" --listen "$sock" \
  --max-num-seqs 8 --max-model-len $((long + 512)) --log-format console ${ENGINE_ARGS:-}
pid=$SPAWNED
for _ in $(seq 9000); do
  grep -q "engine ready" "$out/engine.log" && break
  kill -0 "$pid" 2>/dev/null || { cat "$out/engine.log"; exit 1; }
  sleep 0.1
done
spawn "$out/frontend.log" "$BIN/api-frontend" --model "$model" --engine "$sock" --port "$port"
wait_health "http://127.0.0.1:$port/health" 120
grep -o '"long_prefill_token_threshold"[^,]*\|long_prefill_token_threshold[^ ]*' "$out/engine.log" | head -1 || true
ticks=$(cpu_ticks "$pid")
python3 "$(dirname "${BASH_SOURCE[0]}")/long-prompt-gap.py" "http://127.0.0.1:$port" --streams "$streams" --long-prompt "$long" --count "${COUNT:-1}" --json "$out/result.json" | tee "$out/summary.txt"
echo "engine CPU $(python3 -c "print(f'{($(cpu_ticks "$pid") - $ticks) / $CLK_TCK:.1f}')") s; load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$out/summary.txt"
stop_all
