#!/usr/bin/env bash
# cuda-fatbin.sh: compile every kernels/cuda/*.cu to a fatbin in
# kernels/cuda/build/ (gitignored; the -tags cuda build embeds it): sm_80 and
# sm_90 cubins plus compute_90 PTX, which the driver JIT-compiles for newer
# GPUs. A fatbin newer than its .cu and every .cuh is left alone.
#
# Needs NVCC (and NVCC_CCBIN_FLAGS) from scripts/cuda-toolkit.sh.
# CUDA_FATBIN_OUT overrides the output folder (the reproducibility check
# builds into a scratch one).
set -euo pipefail
cd "$(dirname "$0")/.."

: "${NVCC:?run: eval \"\$(bash scripts/cuda-toolkit.sh)\" first}"
SRC=kernels/cuda
OUT=${CUDA_FATBIN_OUT:-$SRC/build}
GENCODE=(-gencode arch=compute_80,code=sm_80 -gencode 'arch=compute_90,code=[sm_90,compute_90]')
mkdir -p "$OUT"

shopt -s nullglob
cus=("$SRC"/*.cu)
if [ ${#cus[@]} -eq 0 ]; then
	echo "cuda-fatbin: no .cu files in $SRC" >&2
	exit 1
fi
# Drop fatbins whose source is gone, so the embed never carries stale code.
for fb in "$OUT"/*.fatbin; do
	[ -f "$SRC/$(basename "${fb%.fatbin}").cu" ] || rm -f "$fb"
done

built=0
for cu in "${cus[@]}"; do
	fb="$OUT/$(basename "${cu%.cu}").fatbin"
	if [ -f "$fb" ] && [ -z "$(find "$cu" "$SRC"/*.cuh -newer "$fb" 2>/dev/null)" ]; then
		continue
	fi
	# shellcheck disable=SC2086 # NVCC_CCBIN_FLAGS is a word list
	"$NVCC" ${NVCC_CCBIN_FLAGS:-} -std=c++14 -O3 -Xptxas -warn-spills \
		-fatbin "${GENCODE[@]}" -I"$SRC" -o "$fb.tmp" "$cu"
	mv "$fb.tmp" "$fb"
	built=$((built + 1))
done
echo "cuda-fatbin: ${#cus[@]} kernel files, $built rebuilt, in $OUT" >&2
