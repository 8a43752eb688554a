#!/usr/bin/env bash
# cuda-check.sh: compile-check the CUDA backend on a machine without a GPU.
#
#   1. a CUDA 11.8 toolkit (headers, link stubs, nvcc) unpacked from Debian's
#      packages into the user cache (scripts/cuda-toolkit.sh; once),
#   2. nvcc on every kernels/cuda/*.cu: sm_80 and sm_90 cubins plus
#      compute_90 PTX in one fatbin each (scripts/cuda-fatbin.sh),
#   3. the kernel ABI test: every launch in backend.go packs its arguments
#      at the offsets and sizes the compiled kernels declare (cuobjdump),
#   4. go vet, go build and go test -c (never run) with -tags cuda on the
#      CUDA packages, linking against the toolkit's stub libraries,
#   5. bin/engine-core-cuda, when engine-core's main wires the executor,
#   6. the CPU build: engine-core must not import gorgonia.org/cu nor link
#      libcuda / libcublas.
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
step "go build -tags cuda ${PKGS[*]}"
go build -tags cuda "${PKGS[@]}"
testbin=$(mktemp -d)
trap 'rm -rf "$testbin" ${tmp:+"$tmp"}' EXIT
for p in "${PKGS[@]}"; do
	step "go test -tags cuda -c $p (compiled, not run)"
	go test -tags cuda -c -o "$testbin/$(basename "$p").test" "$p"
done

if grep -q 'engine-core/cudaexec' engine-core/*.go 2>/dev/null; then
	step "go build -tags cuda -o bin/engine-core-cuda ./engine-core"
	go build -tags cuda -o bin/engine-core-cuda ./engine-core
	go version -m bin/engine-core-cuda | grep -q 'gorgonia.org/cu' ||
		{ step "FAIL: bin/engine-core-cuda does not contain the CUDA backend"; exit 1; }
else
	step "engine-core's main does not wire engine-core/cudaexec yet: bin/engine-core-cuda not built"
fi

step "CPU build must not depend on CUDA"
if go list -deps ./engine-core | grep -q '^gorgonia.org/cu'; then
	step "FAIL: the CPU engine-core imports gorgonia.org/cu"
	exit 1
fi
go build -o "$testbin/engine-core" ./engine-core
if go version -m "$testbin/engine-core" | grep -q 'gorgonia.org/cu'; then
	step "FAIL: the CPU engine-core binary contains gorgonia.org/cu"
	exit 1
fi
if ldd "$testbin/engine-core" 2>/dev/null | grep -Eq 'libcuda|libcublas'; then
	step "FAIL: the CPU engine-core binary links CUDA libraries: $(ldd "$testbin/engine-core" | grep -E 'libcuda|libcublas')"
	exit 1
fi
step "ok: CUDA backend vets, builds and links; kernels compile for sm_80, sm_90 (+compute_90 PTX); CPU build is CUDA-free"
