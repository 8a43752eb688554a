// Shared helpers for Sluice's CUDA kernels. Every kernel is extern "C" so
// the Go side can look it up by name; tensors are row-major F32 unless said.
#pragma once
#include <cuda_fp16.h>
#include <stdint.h>

#define FULL_MASK 0xffffffffu

// Q8_0: blocks of 32 int8 values with a float16 scale in front (34 bytes).
#define Q8_BLOCK 32
#define Q8_BLOCK_BYTES 34

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
	return v;
}

// block_sum returns the sum of v over the block to every thread. scratch
// holds at least 32 floats; blockDim.x is a multiple of 32.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
	v = warp_sum(v);
	__syncthreads();
	if (lane == 0) scratch[warp] = v;
	__syncthreads();
	v = lane < nw ? scratch[lane] : 0.f;
	return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
	v = warp_max(v);
	__syncthreads();
	if (lane == 0) scratch[warp] = v;
	__syncthreads();
	v = lane < nw ? scratch[lane] : -INFINITY;
	return warp_max(v);
}

__device__ __forceinline__ float q8_scale(const uint8_t* blk) {
	uint16_t bits = (uint16_t)blk[0] | ((uint16_t)blk[1] << 8);
	return __half2float(__ushort_as_half(bits));
}
