#!/usr/bin/env bash
# cuda-build.sh: build bin/engine-core-cuda, engine-core with the CUDA
# backend compiled in (-tags cuda): the CUDA toolkit environment (headers
# and nvcc: scripts/cuda-toolkit.sh), the kernel fatbins
# (scripts/cuda-fatbin.sh), then go build. The binary loads libcuda and
# cuBLAS at run time, so it starts anywhere; --executor cuda needs a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=1
eval "$(bash scripts/cuda-toolkit.sh)"
bash scripts/cuda-fatbin.sh
if ! grep -q 'engine-core/cudaexec' engine-core/*.go; then
	echo "cuda-build: engine-core's main does not wire engine-core/cudaexec (--executor cuda) yet; nothing to build" >&2
	exit 1
fi
go build -tags cuda -o bin/engine-core-cuda ./engine-core
echo "cuda-build: bin/engine-core-cuda (loads libcuda and cuBLAS at run time; NEEDED: $(readelf -d bin/engine-core-cuda | grep -o 'NEEDED.*' | grep -o '\[.*\]' | tr '\n' ' '))" >&2
