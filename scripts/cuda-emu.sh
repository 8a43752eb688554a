#!/usr/bin/env bash
# cuda-emu.sh: run the CUDA kernels (kernels/cuda/*.cu) on a CPU SIMT
# emulator (kernels/cuda/testdata/emu) and check them against plain loops.
# Needs only g++ >= 12 (C++20): no GPU, no CUDA toolkit. It checks the
# kernels' indexing, barriers, warp shuffles and reductions; not their
# speed, and not the Go launch code (scripts/cuda-test.sh on a GPU does).
set -euo pipefail
cd "$(dirname "$0")/.."
EMU=kernels/cuda/testdata/emu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The one construct the emulator cannot take: dynamic shared memory.
cat kernels/cuda/*.cu | sed 's/^#include "common.cuh"$//; s/extern __shared__ float qs\[\];/float* qs = emu_dynsmem.data();/' >"$tmp/body.inc"
{ cat kernels/cuda/common.cuh | sed 's/^#include <cuda_fp16.h>$//'; cat "$tmp/body.inc"; } >"$tmp/kernels.cu.inc"
CXX=${CXX:-g++-12}
command -v "$CXX" >/dev/null || CXX=g++
"$CXX" -std=c++20 -O1 -pthread -I"$tmp" -I"$EMU" -o "$tmp/emu_test" "$EMU/emu_test.cc"
"$tmp/emu_test"
