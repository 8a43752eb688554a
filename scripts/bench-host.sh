#!/usr/bin/env bash
# Host-path benchmark (issue 8): a simulated engine (fixed step time, no
# model) behind one or two api-frontend processes, driven by `bench serve`
# with STREAMS concurrent streaming completions of INPUT_LEN random prompt
# tokens and OUTPUT_LEN output tokens (ignore_eos). For each stream interval
# and frontend count it prints output tok/s, TTFT/TPOT/ITL p50/p99, the
# frontends' CPU µs per delivered token (/proc/PID/stat utime+stime before
# and after the run) and the throughput the simulated engine would reach with
# zero host overhead.
#
#   scripts/bench-host.sh                              # the full run: 1024 streams, 1024/1024 tokens
#   STREAMS=64 OUTPUT_LEN=64 scripts/bench-host.sh     # a quick dry run
#
# Environment: STREAMS (1024), INPUT_LEN (1024), OUTPUT_LEN (1024), STEP_MS (20),
# BATCHED_TOKENS (engine --max-num-batched-tokens, 8192), INTERVALS ("1 10"),
# FRONTENDS ("1 2 2r": 2 = two api-frontend processes on two ports with the
# bench split across them, 2r = one port served by --api-server-count 2),
# MODEL (a model directory for the tokenizer; default the generated demo-15m:
# 32000-token byte-level BPE, max_model_len 2048), OUT
# (result directory, default /tmp/sluice-bench-host), WINDOW_START_S (8) and WINDOW_S
# (8: a steady-state window in which frontend CPU is divided by the tokens the
# frontends streamed, from their /metrics; 0 to skip; needs OUTPUT_LEN long enough
# that every stream is still decoding then), SKIP_BUILD=1 to reuse bin/.
source "$(dirname "$0")/bench-lib.sh"
kids=()

STREAMS="${STREAMS:-1024}"
INPUT_LEN="${INPUT_LEN:-1024}"
OUTPUT_LEN="${OUTPUT_LEN:-1024}"
STEP_MS="${STEP_MS:-20}"
BATCHED_TOKENS="${BATCHED_TOKENS:-8192}"
INTERVALS="${INTERVALS:-1 10}"
FRONTENDS="${FRONTENDS:-1 2 2r}"
OUT="${OUT:-/tmp/sluice-bench-host}"
WINDOW_START_S="${WINDOW_START_S:-8}"
WINDOW_S="${WINDOW_S:-8}"
# No window when the streams would finish before it ends.
if (( OUTPUT_LEN * STEP_MS / 1000 < WINDOW_START_S + WINDOW_S + 2 )); then WINDOW_S=0; fi

# scrape_sum PORT…: "tokens chunks" summed over the frontends' /metrics, where
# tokens streamed = SSE chunks + tokens coalesced into an earlier chunk
# (vllm:generation_tokens_total is only counted when a request finishes).
scrape_sum() {
  local port
  for port in "$@"; do curl -fsS "http://127.0.0.1:$port/metrics"; done |
    awk '/^sluice_frontend_coalesced_tokens_total/ {t += $NF} /^sluice_frontend_sse_chunks_total/ {c += $NF; t += $NF} END {printf "%.0f %.0f\n", t, c}'
}
mkdir -p "$OUT"

bench_build
MODEL="${MODEL:-}"
if [[ -z "$MODEL" ]]; then
  MODEL="${XDG_CACHE_HOME:-$HOME/.cache}/sluice/models/demo-15m-0"
  if [[ ! -f "$MODEL/tokenizer.json" ]]; then
    "$BIN/engine-core" gen-model --shape 15m --out "$MODEL"
  fi
fi

echo "host-path benchmark: streams $STREAMS, input $INPUT_LEN, output $OUTPUT_LEN, step ${STEP_MS} ms, max-num-batched-tokens $BATCHED_TOKENS"
summary="$OUT/summary.tsv"
printf 'frontends\tinterval\tstreams\tout_tok_s\tideal_tok_s\tof_ideal\tttft_p50_ms\tttft_p99_ms\tideal_ttft_p50\tideal_ttft_p99\ttpot_p50_ms\ttpot_p99_ms\titl_p50_ms\titl_p99_ms\tfe_cpu_us_per_tok\tfe_window_us_per_tok\twindow_chunks_per_tok\teng_cpu_us_per_tok\tclient_cpu_cores\ttokens\tfailed\tload_before\tload_after\n' >"$summary"

for iv in $INTERVALS; do
  for nfe in $FRONTENDS; do
    tag="fe${nfe}-iv${iv}-s${STREAMS}"
    echo "--- $tag"
    bench_state
    load_before="$(cut -d' ' -f1 /proc/loadavg)"
    sock="ipc://$OUT/engine-$tag.sock"
    spawn "$OUT/$tag-engine.log" "$BIN/engine-core" --model "$MODEL" --executor sim --sim-step-ms "$STEP_MS" \
      --listen "$sock" --max-num-seqs "$STREAMS" --max-num-batched-tokens "$BATCHED_TOKENS" --log-format console
    eng=$SPAWNED
    fes=()
    ports=()
    if [[ "$nfe" == *r ]]; then
      # One port: api-frontend --api-server-count N supervises N children
      # sharing it with SO_REUSEPORT; the bench sends all streams there.
      port="$(free_port)"
      spawn "$OUT/$tag-fe.log" "$BIN/api-frontend" --api-server-count "${nfe%r}" --model "$MODEL" --engine "$sock" \
        --host 127.0.0.1 --port "$port" --stream-interval "$iv" --log-format json
      sup=$SPAWNED
      ports+=("$port")
      wait_health "http://127.0.0.1:$port/health" 120
      for _ in $(seq 100); do
        mapfile -t kids < <(pgrep -P "$sup" || true)
        [[ ${#kids[@]} -ge ${nfe%r} ]] && break
        sleep 0.1
      done
      fes=("$sup" "${kids[@]}")
      echo "supervisor $sup, children ${kids[*]}"
      nbench=1
    else
      for ((i = 0; i < nfe; i++)); do
        port="$(free_port)"
        spawn "$OUT/$tag-fe$i.log" "$BIN/api-frontend" --model "$MODEL" --engine "$sock" --host 127.0.0.1 --port "$port" \
          --stream-interval "$iv" --log-format json
        fes+=("$SPAWNED")
        ports+=("$port")
      done
      for port in "${ports[@]}"; do wait_health "http://127.0.0.1:$port/health" 120; done
      nbench=$nfe
    fi
    fe_before="$(cpu_ticks "${fes[@]}")"
    per_before=(); for p in "${fes[@]}"; do per_before+=("$(cpu_ticks "$p")"); done
    eng_before="$(cpu_ticks "$eng")"
    benches=()
    per=$((STREAMS / nbench))
    for ((i = 0; i < nbench; i++)); do
      "$BIN/bench" serve --base-url "http://127.0.0.1:${ports[$i]}" --tokenizer "$MODEL" --seed "$((i + 1))" \
        --num-prompts "$per" --max-concurrency "$per" --random-input-len "$INPUT_LEN" --random-output-len "$OUTPUT_LEN" \
        --ignore-eos --disable-tqdm --ready-check-timeout-sec 0 --percentile-metrics ttft,tpot,itl \
        --metric-percentiles 50,99 --label "$tag-$i" --result-json "$OUT/$tag-$i.json" >"$OUT/$tag-bench$i.log" 2>&1 &
      benches+=($!)
      PIDS+=($!)
    done
    # Steady-state window: WINDOW_S seconds starting WINDOW_START_S after the
    # bench starts (all prefills done, every stream decoding): frontend CPU
    # over the tokens the frontends streamed in it (see scrape_sum).
    # Skipped for one shared port (a scrape reaches only one child).
    win="n/a	n/a"
    if [[ "$nfe" != *r && "$WINDOW_S" -gt 0 ]]; then
      sleep "$WINDOW_START_S"
      w0="$(cpu_ticks "${fes[@]}")"; m0="$(scrape_sum "${ports[@]}")"
      sleep "$WINDOW_S"
      w1="$(cpu_ticks "${fes[@]}")"; m1="$(scrape_sum "${ports[@]}")"
      win="$(python3 -c "import sys
t0, c0 = map(float, '$m0'.split()); t1, c1 = map(float, '$m1'.split())
tok = t1 - t0
print(f'{($w1 - $w0) / $CLK_TCK * 1e6 / tok:.2f}\t{(c1 - c0) / tok:.3f}' if tok > 0 else 'n/a\tn/a')")"
      echo "window: $((w1 - w0)) ticks, tokens+chunks before '$m0' after '$m1'"
    fi
    for b in "${benches[@]}"; do wait "$b" || echo "bench $b exited with $?"; done
    fe_after="$(cpu_ticks "${fes[@]}")"
    i=0; for p in "${fes[@]}"; do echo "frontend pid $p: $(( $(cpu_ticks "$p") - per_before[i] )) ticks"; i=$((i + 1)); done
    eng_after="$(cpu_ticks "$eng")"
    load_after="$(cut -d' ' -f1 /proc/loadavg)"
    bench_state
    stop_all
    for k in "${kids[@]:-}"; do [[ -n "$k" ]] && kill -KILL "$k" 2>/dev/null || true; done
    kids=()
    python3 - "$OUT" "$tag" "$nfe" "$iv" "$STREAMS" "$INPUT_LEN" "$OUTPUT_LEN" "$STEP_MS" "$BATCHED_TOKENS" \
      "$((fe_after - fe_before))" "$((eng_after - eng_before))" "$CLK_TCK" "$load_before" "$load_after" "$nbench" "$win" >>"$summary" <<'EOF'
import json, sys
out, tag, nfe, iv, streams, inlen, outlen, step, budget, fe_t, eng_t, tck, lb, la, nbench, win = sys.argv[1:]
nbench, streams, inlen, outlen, budget = int(nbench), int(streams), int(inlen), int(outlen), int(budget)
step, tck = float(step), float(tck)
rs = [json.load(open(f"{out}/{tag}-{i}.json")) for i in range(nbench)]

def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100
    f = int(k)
    c = min(f + 1, len(xs) - 1)
    return xs[f] + (xs[c] - xs[f]) * (k - f)

ttft, tpot, itl, tokens, failed, client = [], [], [], 0, 0, 0.0
for r in rs:
    failed += r["failed"]
    client += r.get("client_cpu_cores", 0)
    for i, n in enumerate(r["output_lens"]):
        if r["errors"][i]:
            continue
        tokens += n
        ttft.append(r["ttfts"][i] * 1e3)
        if n > 1:
            tpot.append((r["latencies"][i] - r["ttfts"][i]) / (n - 1) * 1e3)
        itl.extend(x * 1e3 for x in r["itls"][i])
duration = max(r["duration"] for r in rs)
tps = tokens / duration

# Ideal: every step takes exactly `step` ms (the simulator's time model with
# zero host overhead); the scheduler fills each step with one decode per
# running request, then prefill chunks FCFS up to the token budget.
pending = [inlen] * streams  # prompt tokens still to prefill, FCFS
remaining = [outlen] * streams
running = []  # indices decoding
steps, head = 0, 0
first_step = []  # step at whose end each request's first token exists
while head < streams or running:
    steps += 1
    left = budget - len(running)
    nxt = []
    for i in running:
        remaining[i] -= 1
        if remaining[i] > 0:
            nxt.append(i)
    while head < streams and left > 0:
        take = min(left, pending[head])
        pending[head] -= take
        left -= take
        if pending[head] == 0:
            first_step.append(steps)
            remaining[head] -= 1  # the prefill step samples the first token
            if remaining[head] > 0:
                nxt.append(head)
            head += 1
        else:
            break
    running = nxt
ideal = streams * outlen / (steps * step / 1e3)
ideal_ttft = [n * step for n in first_step]
fe_us = float(fe_t) / tck * 1e6 / tokens if tokens else float("nan")
eng_us = float(eng_t) / tck * 1e6 / tokens if tokens else float("nan")
print("\t".join(str(x) for x in [
    nfe, iv, streams, round(tps), round(ideal), f"{tps / ideal:.3f}",
    f"{pct(ttft, 50):.0f}", f"{pct(ttft, 99):.0f}", f"{pct(ideal_ttft, 50):.0f}", f"{pct(ideal_ttft, 99):.0f}", f"{pct(tpot, 50):.2f}", f"{pct(tpot, 99):.2f}",
    f"{pct(itl, 50):.2f}", f"{pct(itl, 99):.2f}", f"{fe_us:.2f}", win, f"{eng_us:.2f}", f"{client:.2f}",
    tokens, failed, lb, la]))
EOF
    tail -1 "$summary" | column -t -s $'\t'
  done
done
echo "=== summary ($summary); ideal = $STREAMS x $OUTPUT_LEN tokens in the step count a zero-overhead host needs at ${STEP_MS} ms/step"
column -t -s $'\t' "$summary"
