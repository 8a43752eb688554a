#!/usr/bin/env bash
# Tools present vs absent TTFT (issue 7): a simulated engine whose --sim-script
# answers every prompt with prose, one api-frontend with
# --enable-auto-tool-choice --tool-call-parser hermes, and
# scripts/bench-tools-ttft keeping CONCURRENCY streamed chat requests in
# flight, every other one carrying four tool definitions. Prints the time to
# the first content chunk (p50/p90/p99) for each kind; they should be equal
# within noise, and no request may come back with a tool call.
#
#   scripts/bench-tools.sh
#   REQUESTS=128 CONCURRENCY=16 scripts/bench-tools.sh   # quick
#
# Environment: REQUESTS (1024), CONCURRENCY (64), MAX_TOKENS (32), STEP_MS (20),
# MODE (mixed; tools or none run one kind only), ROUNDS (1: each round is
# a separate run against the same servers), VARIANTS ("plain markup": the
# scripted answer is plain prose, or starts with "<b>", which a hermes parser
# must hold back until it cannot be "<tool_call>"), MODEL (tokenizer directory,
# default the generated demo-15m), OUT (/tmp/sluice-bench-tools), SKIP_BUILD=1.
source "$(dirname "$0")/bench-lib.sh"

REQUESTS="${REQUESTS:-1024}"
CONCURRENCY="${CONCURRENCY:-64}"
MAX_TOKENS="${MAX_TOKENS:-32}"
STEP_MS="${STEP_MS:-20}"
MODE="${MODE:-mixed}"
ROUNDS="${ROUNDS:-1}"
VARIANTS="${VARIANTS:-plain markup}"
OUT="${OUT:-/tmp/sluice-bench-tools}"
mkdir -p "$OUT"
bench_build
(cd "$root" && go build -o bin/ ./scripts/bench-tools-ttft)
MODEL="${MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice/models/demo-15m-0}"
if [[ ! -f "$MODEL/tokenizer.json" ]]; then
  "$BIN/engine-core" gen-model --shape 15m --out "$MODEL"
fi

cat >"$OUT/prose.jsonl" <<'EOF'
{"match": "in bold", "output": "<b>Note</b>: on a rocky island far from the coast there lived a lighthouse keeper named Ada. Every evening she climbed the winding stairs, polished the great lens and lit the lamp."}
{"match": "", "output": "Once upon a time, on a rocky island far from the coast, there lived a lighthouse keeper named Ada. Every evening she climbed the winding stairs, polished the great lens and lit the lamp, so that the fishing boats could find their way home through the fog."}
EOF

bench_state
sock="ipc://$OUT/engine.sock"
port="$(free_port)"
spawn "$OUT/engine.log" "$BIN/engine-core" --model "$MODEL" --executor sim --sim-step-ms "$STEP_MS" \
  --sim-script "$OUT/prose.jsonl" --listen "$sock" --max-num-seqs 1024 --log-format console
spawn "$OUT/fe.log" "$BIN/api-frontend" --model "$MODEL" --engine "$sock" --host 127.0.0.1 --port "$port" \
  --enable-auto-tool-choice --tool-call-parser hermes --log-format json
wait_health "http://127.0.0.1:$port/health" 120
for ((r = 1; r <= ROUNDS; r++)); do
  for v in $VARIANTS; do
    prompt="Tell me a short story about a lighthouse keeper."
    [[ "$v" == markup ]] && prompt="Tell me, in bold, a short story about a lighthouse keeper."
    echo "--- round $r, answer $v"
    "$BIN/bench-tools-ttft" --base-url "http://127.0.0.1:$port" --requests "$REQUESTS" --concurrency "$CONCURRENCY" \
      --max-tokens "$MAX_TOKENS" --mode "$MODE" --prompt "$prompt" --result-json "$OUT/round$r-$v.json"
    bench_state
  done
done
