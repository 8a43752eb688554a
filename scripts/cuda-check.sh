#!/usr/bin/env bash
# cuda-check.sh: compile-check the CUDA backend on a machine without a GPU.
#
#   1. a CUDA 11.8 toolkit (headers, link stubs, nvcc) unpacked from Debian's
#      packages into the user cache (scripts/cuda-toolkit.sh; once),
#   2. nvcc on every kernels/cuda/*.cu: sm_80 and sm_90 cubins plus
#      compute_90 PTX in one fatbin each (scripts/cuda-fatbin.sh),
#   3. the kernel ABI test: every launch in backend.go packs its arguments
#      at the offsets and sizes the compiled kernels declare (cuobjdump),
#   4. go vet with -tags cuda on the CUDA packages,
#   5. the GPU bundle (scripts/cuda-package.sh → bin/gpu): bin/engine-core-cuda
#      and the go test -c -tags cuda binaries, stripped, with libzmq & co and
#      the small models; it fails if a CUDA binary has DT_NEEDED on libcuda
#      or libcublas (both are dlopened at run time) or if what a GPU run
#      carries is over 64 MiB,
#   6. the kernels/cuda test binary runs here: the run-time loading of
#      libcuda and libcublas against the toolkit's link stubs (every symbol
#      resolves; Open fails cleanly with the stub's CUresult; with no
#      library at all the error names every place tried), and every GPU
#      test skips cleanly,
#   7. engine-core-cuda --executor cuda exits with the loader's error here
#      instead of crashing,
#   8. the CPU build: engine-core has none of the CUDA loader and links no
#      CUDA library,
#   9. scripts/gpu-run.sh --dry-run walks every step of the GPU run here
#      (test binaries skip, tiny model, CPU executor, 8 streams).
#
# CUDA_EMU=1 also runs the kernels on the CPU SIMT emulator
# (scripts/cuda-emu.sh, about 30 s) inside the gpu-run.sh dry run, where it
# stands in for the GPU kernel tests. CUDA_REPRO=1 also rebuilds every fatbin in a scratch folder and checks the
# bytes are identical (the build is reproducible from the .cu sources).
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(./kernels/cuda ./engine-core/cudaexec)
export CGO_ENABLED=1
step() { echo "cuda-check: $*" >&2; }

eval "$(bash scripts/cuda-toolkit.sh)"
step "toolkit: $("$NVCC" --version | tail -2 | head -1) ($NVCC)"

bash scripts/cuda-fatbin.sh

if [ "${CUDA_REPRO:-0}" = 1 ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	CUDA_FATBIN_OUT="$tmp" bash scripts/cuda-fatbin.sh
	for fb in kernels/cuda/build/*.fatbin; do
		cmp -s "$tmp/$(basename "$fb")" "$fb" || { step "FAIL: $fb differs on rebuild"; exit 1; }
	done
	step "fatbins rebuild byte-identical"
fi

step "kernel ABI: Go launch arguments against the compiled parameter layouts"
CUDA_CHECK_STRICT=1 go test -count=1 -run '^TestKernelParamLayout$' ./kernels/cuda >&2

step "go vet -tags cuda ${PKGS[*]}"
go vet -tags cuda "${PKGS[@]}"
bash scripts/cuda-package.sh
B=bin/gpu-build
testbin=$(mktemp -d)
trap 'rm -rf "$testbin" ${tmp:+"$tmp"}' EXIT

step "run-time loading against the toolkit's link stubs; GPU tests skip cleanly without a GPU"
stubs="$CUDA_ROOT/lib/x86_64-linux-gnu/stubs"
[ -d "$stubs" ] || stubs="$CUDA_ROOT/lib64/stubs"
(cd kernels/cuda && SLUICE_CUDA_STUBS="$stubs" "../../$B/test/cuda.test" -test.count=1 -test.v) >"$testbin/cuda.log" 2>&1 ||
	{ cat "$testbin/cuda.log" >&2; step "FAIL: kernels/cuda tests"; exit 1; }
grep -E -- '^--- (PASS|FAIL): Test(NoLibraries|DriverStub|CUBLASStub)' "$testbin/cuda.log" >&2
grep -q -- '--- PASS: TestDriverStubBindsAndFailsCleanly' "$testbin/cuda.log" ||
	{ cat "$testbin/cuda.log" >&2; step "FAIL: the driver stub test did not pass"; exit 1; }
step "  $(grep -c -- '--- SKIP' "$testbin/cuda.log") GPU tests skipped cleanly"

step "engine-core-cuda --executor cuda without a GPU: a clean error"
"$B/engine-core-cuda" gen-model --out "$testbin/model" --shape tiny >/dev/null 2>&1
rc=0
SLUICE_LIBCUDA="$stubs/libcuda.so" timeout 60 "$B/engine-core-cuda" --executor cuda --model "$testbin/model" \
	--listen "ipc://$testbin/engine.sock" >"$testbin/engine.log" 2>&1 || rc=$?
if [ "$rc" = 0 ] || [ "$rc" -ge 124 ] || ! grep -Eq 'no usable NVIDIA GPU|no NVIDIA driver library' "$testbin/engine.log"; then
	cat "$testbin/engine.log" >&2
	step "FAIL: engine-core-cuda --executor cuda without a GPU: exit $rc, want the loader's error"
	exit 1
fi
step "  exit $rc: $(grep -Eo '(no usable NVIDIA GPU|no NVIDIA driver library)[^"]*' "$testbin/engine.log" | head -1)"
grep -aq 'cuMemAlloc_v2' "$B/engine-core-cuda" || { step "FAIL: engine-core-cuda does not contain the CUDA loader"; exit 1; }

step "CPU build must not depend on CUDA"
go build -o "$testbin/engine-core" ./engine-core
if grep -aq 'cuMemAlloc_v2' "$testbin/engine-core"; then
	step "FAIL: the CPU engine-core binary contains the CUDA loader"
	exit 1
fi
if readelf -d "$testbin/engine-core" | grep -Eq 'NEEDED.*(libcuda|libcublas)'; then
	step "FAIL: the CPU engine-core binary links CUDA libraries"
	exit 1
fi

step "scripts/gpu-run.sh --dry-run"
OUT="$testbin/gpu-out" bash scripts/gpu-run.sh --dry-run $([ "${CUDA_EMU:-0}" = 1 ] && echo --emu) ||
	{ cat "$testbin/gpu-out/report.md" >&2; step "FAIL: gpu-run.sh --dry-run"; exit 1; }
step "ok: CUDA backend vets and builds; libcuda/libcublas loaded at run time (no DT_NEEDED) and fail cleanly without a GPU; kernels compile for sm_80, sm_90 (+compute_90 PTX); GPU bundle under 64 MiB; gpu-run.sh dry run passes; CPU build is CUDA-free"
