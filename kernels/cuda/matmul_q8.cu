// Q8_0 weight matrices times F32 activations (cuBLAS has no Q8_0 GEMM):
// a row kernel for up to a few dozen activation rows, and the widening
// kernel of the many-row path (slices of the weight widened to F32 for
// cuBLAS).
#include "common.cuh"

#define MM_ROWS 8 // activation rows per warp: each weight value is read once per MM_ROWS rows

// matmul_q8_0: out[r][o] = sum_k x[r][k] * W[o][k] for W [outDim x in] in
// Q8_0 and rows r < n. One warp per (output o, group of MM_ROWS rows);
// blockDim.x = 32 * warps, grid.x covers outDim in groups of warps, grid.y
// the rows in groups of MM_ROWS. A warp's pass covers 4 blocks (128
// values): lane l reads values 4(l%8)..+3 of block l/8 as two 16-bit loads
// (34-byte blocks keep them 2-byte aligned) and the matching float4 of each
// activation row (x's row stride is a multiple of 4: the Go side checks),
// so the warp's loads are contiguous; it scales its 4-term partial sum by
// the block's scale, as the reference scales each block's partial sum.
// (One lane per whole block, as before, read 34 bytes per lane one by one:
// 4.7 % of an H200's bandwidth at one row, and no reuse across rows.)
extern "C" __global__ void matmul_q8_0(float* out, int outCols, const float* x, int xCols, const uint8_t* w, int in, int outDim, int n) {
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int o = blockIdx.x * (blockDim.x >> 5) + warp;
	const int r0 = blockIdx.y * MM_ROWS;
	if (o >= outDim) return; // whole warps only
	const int nr = min(MM_ROWS, n - r0);
	const int nb = in / Q8_BLOCK, sub = lane & 7;
	const uint8_t* wr = w + (size_t)o * nb * Q8_BLOCK_BYTES;
	const float* xr = x + (size_t)r0 * xCols + 4 * sub;
	float acc[MM_ROWS];
#pragma unroll
	for (int r = 0; r < MM_ROWS; r++) acc[r] = 0.f;
	for (int b = lane >> 3; b < nb; b += 4) { // (#pragma unroll 4 measured slower: 21 against 15 µs at 1 row)
		const uint8_t* blk = wr + (size_t)b * Q8_BLOCK_BYTES;
		const float d = q8_scale(blk);
		const uint16_t* q = (const uint16_t*)(blk + 2 + 4 * sub);
		const uint16_t lo = q[0], hi = q[1];
		const float q0 = (float)(int8_t)(lo & 0xff), q1 = (float)(int8_t)(lo >> 8);
		const float q2 = (float)(int8_t)(hi & 0xff), q3 = (float)(int8_t)(hi >> 8);
#pragma unroll
		for (int r = 0; r < MM_ROWS; r++) {
			if (r < nr) {
				const float4 xv = *(const float4*)(xr + (size_t)r * xCols + b * Q8_BLOCK);
				acc[r] += d * (xv.x * q0 + xv.y * q1 + xv.z * q2 + xv.w * q3);
			}
		}
	}
#pragma unroll
	for (int r = 0; r < MM_ROWS; r++) {
		const float v = warp_sum(acc[r]);
		if (lane == 0 && r < nr) out[(size_t)(r0 + r) * outCols + o] = v;
	}
}

// dequant_q8_0: dst[i] = d * q for the first total values of a Q8_0
// matrix (rows of whole blocks, so value i is in block i/32): the many-row
// path widens a slice of weight rows and hands it to cuBLAS.
extern "C" __global__ void dequant_q8_0(float* dst, const uint8_t* w, long long total) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
		const uint8_t* blk = w + (i / Q8_BLOCK) * Q8_BLOCK_BYTES;
		dst[i] = q8_scale(blk) * (float)(int8_t)blk[2 + i % Q8_BLOCK];
	}
}
