#!/usr/bin/env bash
# cuda-test.sh: run the GPU tests and the decode benchmark of the CUDA
# backend with `go test` on a GPU host that has Go (a lent machine without Go
# runs scripts/gpu-run.sh on the bundle built here instead). Where no NVIDIA
# GPU and driver are present it says so and exits 0 (the tests themselves
# would skip: the driver and cuBLAS are loaded at run time).
#
#   BENCHTIME  benchmark time per case (default 2s; BENCHTIME=0 skips them)
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(./kernels/cuda ./engine-core/cudaexec)
skip() {
	echo "cuda-test: SKIP: $* — the CUDA tests were not run (they are compiled by scripts/cuda-check.sh)" >&2
	exit 0
}

command -v nvidia-smi >/dev/null || [ -e /dev/nvidia0 ] || skip "no NVIDIA GPU on this machine (no nvidia-smi, no /dev/nvidia0)"
ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' || [ -n "${LD_LIBRARY_PATH:-}" ] ||
	skip "no NVIDIA driver library (libcuda.so.1) on this machine"
if command -v nvidia-smi >/dev/null; then
	nvidia-smi -L >&2 || skip "nvidia-smi lists no usable GPU"
fi
if [ -z "${CUDA_HOME:-}" ] && [ -d /usr/local/cuda ]; then
	export CUDA_HOME=/usr/local/cuda
fi
if [ -n "${CUDA_HOME:-}" ] && [ -d "$CUDA_HOME/lib64" ]; then
	export LD_LIBRARY_PATH="$CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

export CGO_ENABLED=1
eval "$(bash scripts/cuda-toolkit.sh)"
bash scripts/cuda-fatbin.sh

echo "cuda-test: go test -tags cuda ${PKGS[*]}" >&2
go test -tags cuda -count=1 -v -timeout 20m "${PKGS[@]}"

bt=${BENCHTIME:-2s}
if [ "$bt" != 0 ]; then
	echo "cuda-test: benchmarks (-benchtime $bt)" >&2
	go test -tags cuda -run '^$' -bench . -benchtime "$bt" -timeout 30m "${PKGS[@]}"
fi
