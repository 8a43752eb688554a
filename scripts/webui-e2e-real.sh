#!/usr/bin/env bash
# Runs the web UI's browser test against real processes: bin/api-frontend with
# --web-ui spawning bin/engine-core (simulated executor, 20 ms steps, the
# demo-15m model's tokenizer) and a --sim-script that answers the test's tool
# and reasoning prompts with hermes tool-call markup and <think> reasoning, parsed
# by the real frontend (--tool-call-parser hermes, --reasoning-parser qwen3).
# Mid-stream errors are covered by the scripted fake server run (scripts/webui-test.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
go build -o bin/ ./engine-core ./api-frontend
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
log=$(mktemp)
script=$(mktemp)
cat >"$script" <<'JSONL'
{"match": "Think, then tell me the weather", "output": "<think>I will look the weather up.</think><tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>"}
{"match": "weather in Paris", "output": "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>"}
{"match": "think before you answer", "output": "<think>Two and two: four.</think>Four."}
JSONL
bin/api-frontend --model demo-15m --executor sim --sim-step-ms 20 --sim-script "$script" --web-ui \
  --enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser qwen3 \
  --host 127.0.0.1 --port "$port" >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true; rm -f "$log" "$script"' EXIT
for _ in $(seq 1 600); do
  curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { cat "$log"; echo "webui-e2e-real: api-frontend exited" >&2; exit 1; }
  sleep 0.1
done
SLUICE_UI_BASE_URL="http://127.0.0.1:$port" SLUICE_UI_SKIP=midstream-error SLUICE_UI_LONG_MAX_TOKENS=1500 \
  bash scripts/webui-test.sh
