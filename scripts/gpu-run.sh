#!/usr/bin/env bash
# gpu-run.sh: the whole CUDA suite in one command on a lent GPU machine
# (CUDA 13 image, no Go, no network), from the repository root, with the
# bundle that scripts/cuda-package.sh built here carried in bin/gpu:
#
#   device run: command "bash scripts/gpu-run.sh", carry ["bin/gpu"], timeout_s 600
#
# Steps, each logged, with a summary in $OUT/report.md (OUT is the folder
# the device tool returns; bin/gpu-out when unset):
#   1. nvidia-smi, and the libraries the backend loads (driver, cuBLAS)
#   2. GPU tests (SLUICE_CUDA_REQUIRE=1: a skip is a failure): every kernel
#      against the CPU reference, whole-model logits against the CPU path
#      (≤ 1e-3), device sampling against host sampling, greedy generation
#      on aidreams260K and stories260K equal to the CPU's tokens
#   3. a TinyLlama-1.1B-shaped F32 model generated here (engine-core-cuda
#      gen-model --shape 1b; weights do not travel)
#   4. decode benchmark at batch 1/16/64/256 on it: tok/s, ms/step, weight
#      and HBM bandwidth against the device's peak; then on a Q8_0 GGUF of
#      the same shape
#   5. engine-core-cuda --executor cuda + api-frontend, driven by
#      `bench serve` at 256 concurrent streams
#
# --dry-run walks the same steps on a machine without a GPU (scripts/
# cuda-check.sh does): no nvidia-smi, the test binaries must start and skip
# cleanly, a tiny model, the CPU executor, 8 streams. --emu (with --dry-run)
# also runs the kernels on the CPU SIMT emulator (scripts/cuda-emu.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
G=$ROOT/bin/gpu
DRY=0 EMU=0
for a in "$@"; do
	case $a in
	--dry-run) DRY=1 ;;
	--emu) EMU=1 ;;
	*) echo "usage: $0 [--dry-run [--emu]]" >&2; exit 2 ;;
	esac
done
OUTDIR=${OUT:-$ROOT/bin/gpu-out}
mkdir -p "$OUTDIR"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-gpu.XXXXXX")
REPORT=$OUTDIR/report.md
FAILED=()
PIDS=()
cleanup() {
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null; done
	rm -rf "$WORK"
}
trap cleanup EXIT
T0=$(date +%s)
say() { echo "gpu-run [$(($(date +%s) - T0))s]: $*" >&2; echo "$*" >>"$REPORT"; }
fail() { FAILED+=("$1"); say "**FAIL: $1**"; }
# lim N: a step's time limit, N seconds or what is left of the whole run's
# budget (BUDGET_S, default 570 s: the device tool stops a command at 600).
BUDGET=${BUDGET_S:-570}
lim() { local left=$((BUDGET - ($(date +%s) - T0))); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }

[ -f "$G/bin.tar.gz" ] || { echo "gpu-run: no bundle in bin/gpu: run 'go tool task gpu:package' where Go is, and carry bin/gpu" >&2; exit 1; }
B=$WORK/b # the unpacked binaries and libraries
mkdir -p "$B"
tar -C "$B" -xzf "$G/bin.tar.gz" 2>/dev/null ||
	python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$G/bin.tar.gz" "$B" ||
	{ echo "gpu-run: cannot unpack $G/bin.tar.gz" >&2; exit 1; }
# The carried libraries serve our binaries only (not nvidia-smi or python3).
run_bin() { LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }
# start_bin runs a server in the background as `start_bin CMD... &`: exec
# makes the background job the server itself, so $! is its PID and cleanup's
# kill reaches it (a backgrounded run_bin left the servers running).
start_bin() { LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$@"; }
export SLUICE_SHARED_MODELS=$G/models
if [ "$DRY" = 0 ]; then export SLUICE_CUDA_REQUIRE=1; fi

: >"$REPORT"
say "# scripts/gpu-run.sh $([ "$DRY" = 1 ] && echo '(dry run, no GPU)')"
say ""
say "- date: $(date -u +%FT%TZ), host $(uname -n), $(nproc) cores"
say "- bundle: $(head -3 "$G/MANIFEST" 2>/dev/null | tr '\n' ';')"

# 1. The device and the libraries.
if [ "$DRY" = 1 ]; then
	say "- nvidia-smi: skipped (dry run)"
else
	nvidia-smi >"$OUTDIR/nvidia-smi.txt" 2>&1 || fail "nvidia-smi"
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv,noheader >>"$OUTDIR/nvidia-smi.txt" 2>&1
	say "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
fi
say "- python3 site folders: $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>&1 | head -1)"

# 2. GPU tests. Each binary runs in its package folder (the working tree
# travels), with the carried models.
TESTLOG=$OUTDIR/tests.log
: >"$TESTLOG"
for t in kernels/cuda:cuda engine-core/cudaexec:cudaexec; do
	dir=${t%%:*} bin=$B/test/${t##*:}.test
	say ""
	say "## tests: $dir"
	(cd "$dir" && run_bin timeout "$(lim 180)" "$bin" -test.v -test.count=1) >"$WORK/t.log" 2>&1
	rc=$?
	cat "$WORK/t.log" >>"$TESTLOG"
	say "- exit $rc: $(grep -c -- '--- PASS' "$WORK/t.log") passed, $(grep -c -- '--- SKIP' "$WORK/t.log") skipped, $(grep -c -- '--- FAIL' "$WORK/t.log") failed (details in tests.log)"
	grep -o 'device: .*' "$WORK/t.log" | head -1 | sed 's/^/- /' >>"$REPORT"
	if [ "$rc" != 0 ]; then fail "tests in $dir (exit $rc)"; grep -- '--- FAIL' "$WORK/t.log" | tail -5 | sed 's/^/  /' >>"$REPORT"; fi
done
if [ "$DRY" = 1 ]; then
	# Without a GPU every device test must skip with the loader's error,
	# never crash or fail.
	grep -q 'no usable CUDA device\|CUDA runner' "$TESTLOG" || fail "dry run: the tests did not report the missing GPU"
	if [ "$EMU" = 1 ]; then
		say "- kernels on the CPU SIMT emulator (stand-in for the GPU kernel tests):"
		bash scripts/cuda-emu.sh >>"$TESTLOG" 2>&1 || fail "kernels on the emulator"
		tail -3 "$TESTLOG" | sed 's/^/  /' >>"$REPORT"
	fi
fi

# 3. A 1B-shaped model, generated here.
SHAPE=1b
[ "$DRY" = 1 ] && SHAPE=tiny
MODEL=$WORK/model-$SHAPE
say ""
say "## model: gen-model --shape $SHAPE"
if run_bin timeout "$(lim 180)" "$B/engine-core-cuda" gen-model --shape "$SHAPE" --out "$MODEL" >"$WORK/gen.log" 2>&1; then
	say "- $(du -sh "$MODEL" | cut -f1) in $MODEL"
else
	cat "$WORK/gen.log" >&2
	fail "gen-model --shape $SHAPE"
fi

# 4. Decode benchmark: batch 1/16/64/256.
say ""
say "## decode benchmark (BenchmarkDecodeBatch, $SHAPE, F32, greedy, 128-token prompts)"
(cd engine-core/cudaexec && SLUICE_DECODE_MODEL=$MODEL run_bin timeout "$(lim 180)" "$B/test/cudaexec.test" -test.run '^$' \
	-test.v -test.bench 'DecodeBatch' -test.benchtime "${BENCH_STEPS:-20}x") >"$OUTDIR/decode-bench.txt" 2>&1
rc=$?
grep -E '^Benchmark|SKIP|CUDA runner|^\s+Benchmark' "$OUTDIR/decode-bench.txt" | sed 's/^/    /' >>"$REPORT"
[ "$rc" = 0 ] || fail "decode benchmark (exit $rc)"

# 4b. The same sweep on the same shape in Q8_0 (GGUF): the quantized path
# (matmul_q8_0 below 40 rows, widened slices through cuBLAS from there).
say ""
say "## decode benchmark, Q8_0 GGUF of the same shape"
MODELQ=$WORK/model-$SHAPE-q8_0
if run_bin timeout "$(lim 120)" "$B/engine-core-cuda" gen-model --shape "$SHAPE" --format gguf-q8_0 --out "$MODELQ" >"$WORK/genq.log" 2>&1; then
	(cd engine-core/cudaexec && SLUICE_DECODE_MODEL=$MODELQ/model.gguf run_bin timeout "$(lim 150)" "$B/test/cudaexec.test" -test.run '^$' \
		-test.v -test.bench 'DecodeBatch' -test.benchtime "${BENCH_STEPS:-20}x") >"$WORK/decq.txt" 2>&1
	rc=$?
	cat "$WORK/decq.txt" >>"$OUTDIR/decode-bench.txt"
	grep -E '^Benchmark|SKIP|CUDA runner|^\s+Benchmark' "$WORK/decq.txt" | sed 's/^/    /' >>"$REPORT"
	[ "$rc" = 0 ] || fail "decode benchmark, Q8_0 (exit $rc)"
else
	cat "$WORK/genq.log" >&2
	fail "gen-model --shape $SHAPE --format gguf-q8_0"
fi

# 5. Serving: engine + frontend + bench serve at 256 streams.
STREAMS=256 PROMPTS=512 IN=128 OUTLEN=128 EXEC=cuda
[ "$DRY" = 1 ] && STREAMS=8 PROMPTS=16 IN=16 OUTLEN=16 EXEC=cpu
say ""
say "## serving: engine-core-cuda --executor $EXEC + api-frontend, bench serve, $STREAMS streams, $PROMPTS prompts, $IN in / $OUTLEN out"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 18431)
SOCK=ipc://$WORK/engine.sock
MAXLEN=512 # every stream can hold a full context at once
start_bin "$B/engine-core-cuda" --executor "$EXEC" --model "$MODEL" --listen "$SOCK" --max-num-seqs "$STREAMS" \
	--max-model-len "$MAXLEN" --num-kv-blocks $((STREAMS * MAXLEN / 16)) --max-num-batched-tokens 8192 >"$OUTDIR/engine.log" 2>&1 &
ENGINE=$!
PIDS+=($!)
start_bin "$B/api-frontend" --model "$MODEL" --engine "$SOCK" --host 127.0.0.1 --port "$PORT" \
	--max-num-seqs "$STREAMS" >"$OUTDIR/frontend.log" 2>&1 &
PIDS+=($!)
# Wait for the frontend's /health (200 once the engine has answered).
health() {
	python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "http://127.0.0.1:$PORT/health" 2>/dev/null
}
for _ in $(seq $((2 * $(lim 180)))); do
	health && break
	kill -0 "$ENGINE" 2>/dev/null || break # the engine exited: no point waiting
	sleep 0.5
done
health || say "- the frontend's /health did not answer 200"
run_bin timeout "$(lim 240)" "$B/bench" serve --base-url "http://127.0.0.1:$PORT" --tokenizer "$MODEL" --seed 1 \
	--num-prompts "$PROMPTS" --max-concurrency "$STREAMS" --random-input-len "$IN" --random-output-len "$OUTLEN" \
	--ignore-eos --disable-tqdm --ready-check-timeout-sec 240 --percentile-metrics ttft,tpot,itl \
	--metric-percentiles 50,99 --label "gpu-run-$EXEC-$STREAMS" --result-json "$OUTDIR/serve.json" >"$OUTDIR/serve.txt" 2>&1
rc=$?
sed 's/^/    /' "$OUTDIR/serve.txt" | tail -30 >>"$REPORT"
[ "$rc" = 0 ] || { fail "bench serve (exit $rc)"; tail -n 5 "$OUTDIR/engine.log" "$OUTDIR/frontend.log" | sed 's/^/    /' >>"$REPORT"; }

say ""
if [ ${#FAILED[@]} -eq 0 ]; then
	say "## result: all steps passed in $(($(date +%s) - T0)) s"
	exit 0
fi
say "## result: ${#FAILED[@]} step(s) failed in $(($(date +%s) - T0)) s: ${FAILED[*]}"
exit 1
