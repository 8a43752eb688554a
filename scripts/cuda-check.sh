#!/usr/bin/env bash
# cuda-check.sh: compile-check the CUDA backend on a machine without a GPU.
#
#   1. a CUDA 11.8 toolkit (headers, link stubs, nvcc) unpacked from Debian's
#      packages into the user cache (scripts/cuda-toolkit.sh; once),
#   2. nvcc on every kernels/cuda/*.cu: sm_80 and sm_90 cubins plus
#      compute_90 PTX in one fatbin each (scripts/cuda-fatbin.sh),
#   3. the kernel ABI test: every launch in backend.go packs its arguments
#      at the offsets and sizes the compiled kernels declare (cuobjdump),
#   4. go vet, go build and go test -c with -tags cuda on the CUDA packages,
#      then the test binaries run here: the run-time loading of libcuda and
#      libcublas against the toolkit's link stubs (every symbol resolves,
#      Open fails cleanly with the stub's CUresult; with no library at all
#      the error names every place tried), and every GPU test skips cleanly,
#   5. bin/engine-core-cuda: no DT_NEEDED on libcuda or libcublas (both are
#      dlopened at run time), and `--executor cuda` here exits with the
#      loader's error (no driver / no GPU) instead of crashing,
#   6. the CPU build: engine-core has none of the CUDA loader and links no
#      CUDA library,
#   7. the GPU bundle (scripts/cuda-package.sh: binaries, libraries, small
#      models) is under the 64 MiB a GPU run may carry, and
#      scripts/gpu-run.sh --dry-run walks every step of the GPU run here.
#
# CUDA_EMU=1 also runs the kernels on the CPU SIMT emulator
# (scripts/cuda-emu.sh, about 30 s). CUDA_REPRO=1 also rebuilds every fatbin in a scratch folder and checks the
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

if [ "${CUDA_EMU:-0}" = 1 ]; then
	step "kernels on the CPU SIMT emulator"
	bash scripts/cuda-emu.sh >&2
fi

step "go vet -tags cuda ${PKGS[*]}"
go vet -tags cuda "${PKGS[@]}"
testbin=$(mktemp -d)
trap 'rm -rf "$testbin" ${tmp:+"$tmp"}' EXIT
for p in "${PKGS[@]}"; do
	step "go test -tags cuda -c $p"
	go test -tags cuda -c -o "$testbin/$(basename "$p").test" "$p"
done
step "run-time loading against the toolkit's link stubs; GPU tests skip cleanly without a GPU"
stubs="$CUDA_ROOT/lib/x86_64-linux-gnu/stubs"
[ -d "$stubs" ] || stubs="$CUDA_ROOT/lib64/stubs"
(cd kernels/cuda && SLUICE_CUDA_STUBS="$stubs" "$testbin/cuda.test" -test.count=1 -test.v) >"$testbin/cuda.log" 2>&1 ||
	{ cat "$testbin/cuda.log" >&2; step "FAIL: kernels/cuda tests"; exit 1; }
grep -E -- '^--- (PASS|FAIL): Test(NoLibraries|DriverStub|CUBLASStub)' "$testbin/cuda.log" >&2
grep -q -- '--- PASS: TestDriverStubBindsAndFailsCleanly' "$testbin/cuda.log" ||
	{ cat "$testbin/cuda.log" >&2; step "FAIL: the driver stub test did not pass"; exit 1; }

step "go build -tags cuda -o bin/engine-core-cuda ./engine-core"
go build -tags cuda -o bin/engine-core-cuda ./engine-core
needed=$(readelf -d bin/engine-core-cuda | grep NEEDED || true)
if grep -Eq 'libcuda|libcublas' <<<"$needed"; then
	step "FAIL: bin/engine-core-cuda has DT_NEEDED on a CUDA library (they must be dlopened): $needed"
	exit 1
fi
go tool nm bin/engine-core-cuda | grep 'sluice_bind_cu' >/dev/null ||
	{ step "FAIL: bin/engine-core-cuda does not contain the CUDA loader"; exit 1; }

step "bin/engine-core-cuda --executor cuda without a GPU: a clean error"
bin/engine-core-cuda gen-model --out "$testbin/model" --shape tiny >/dev/null 2>&1
rc=0
SLUICE_LIBCUDA="$stubs/libcuda.so" timeout 60 bin/engine-core-cuda --executor cuda --model "$testbin/model" \
	--listen "ipc://$testbin/engine.sock" >"$testbin/engine.log" 2>&1 || rc=$?
if [ "$rc" = 0 ] || [ "$rc" -ge 124 ] || ! grep -Eq 'no usable NVIDIA GPU|no NVIDIA driver library' "$testbin/engine.log"; then
	cat "$testbin/engine.log" >&2
	step "FAIL: bin/engine-core-cuda --executor cuda without a GPU: exit $rc, want the loader's error"
	exit 1
fi
step "  exit $rc: $(grep -Eo '(no usable NVIDIA GPU|no NVIDIA driver library)[^"]*' "$testbin/engine.log" | head -1)"

step "CPU build must not depend on CUDA"
go build -o "$testbin/engine-core" ./engine-core
if go tool nm "$testbin/engine-core" | grep 'sluice_bind_cu' >/dev/null; then
	step "FAIL: the CPU engine-core binary contains the CUDA loader"
	exit 1
fi
if readelf -d "$testbin/engine-core" | grep -Eq 'NEEDED.*(libcuda|libcublas)'; then
	step "FAIL: the CPU engine-core binary links CUDA libraries"
	exit 1
fi
if [ -x scripts/gpu-run.sh ] && [ -f scripts/cuda-package.sh ] && [ "${CUDA_CHECK_BUNDLE:-1}" = 1 ]; then
	step "GPU bundle (bin/gpu) size and a dry run of scripts/gpu-run.sh"
	bash scripts/cuda-package.sh >&2
	bash scripts/gpu-run.sh --dry-run >&2
fi
step "ok: CUDA backend vets, builds, loads libcuda/libcublas at run time (no DT_NEEDED), fails cleanly without a GPU; kernels compile for sm_80, sm_90 (+compute_90 PTX); CPU build is CUDA-free"
