// Q8_0 weight matrix times F32 activations (cuBLAS has no Q8_0 GEMM).
#include "common.cuh"

#define Q8_ROWS 8 // activation rows per warp: each weight block is read once per 8 rows

// matmul_q8_0: out[r][o] = sum_k x[r][k] * W[o][k] for W [outDim x in] in
// Q8_0 and rows r < n. One warp per (output, group of Q8_ROWS rows);
// blockDim.x = 32 * warps, grid.x covers outDim in groups of warps, grid.y
// the rows in groups of Q8_ROWS. Each lane takes whole blocks: it decodes
// the block's 32 int8 once, dots them with every row of its group, and
// scales each int8 partial sum once per block as the reference does.
extern "C" __global__ void matmul_q8_0(float* out, int outCols, const float* x, int xCols, const uint8_t* w, int in, int outDim, int n) {
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int o = blockIdx.x * (blockDim.x >> 5) + warp;
	const int r0 = blockIdx.y * Q8_ROWS;
	if (o >= outDim) return; // whole warps only
	const int nr = min(Q8_ROWS, n - r0);
	const int nb = in / Q8_BLOCK;
	const uint8_t* wr = w + (size_t)o * nb * Q8_BLOCK_BYTES;
	float acc[Q8_ROWS];
#pragma unroll
	for (int r = 0; r < Q8_ROWS; r++) acc[r] = 0.f;
	for (int b = lane; b < nb; b += 32) {
		const uint8_t* blk = wr + (size_t)b * Q8_BLOCK_BYTES;
		const float d = q8_scale(blk);
		float wv[Q8_BLOCK];
#pragma unroll
		for (int j = 0; j < Q8_BLOCK; j++) wv[j] = (float)(int8_t)blk[2 + j];
#pragma unroll
		for (int r = 0; r < Q8_ROWS; r++) {
			if (r < nr) {
				const float* xb = x + (size_t)(r0 + r) * xCols + b * Q8_BLOCK;
				float s = 0.f;
#pragma unroll
				for (int j = 0; j < Q8_BLOCK; j++) s += xb[j] * wv[j];
				acc[r] += d * s;
			}
		}
	}
#pragma unroll
	for (int r = 0; r < Q8_ROWS; r++) {
		const float v = warp_sum(acc[r]);
		if (lane == 0 && r < nr) out[(size_t)(r0 + r) * outCols + o] = v;
	}
}
