// Paged KV cache: writing this step's keys/values into their slots, and
// causal attention over block tables (prefill chunks and decode rows in one
// varlen batch, as kernels.AttnBatch describes).
#include "common.cuh"

// write_kv: row i of k and v goes to cache slot slots[i]; one block per row.
extern "C" __global__ void write_kv_f32(float* kc, float* vc, const float* k, const float* v, int kvDim, int kCols, int vCols, const int32_t* slots) {
	int i = blockIdx.x;
	size_t dst = (size_t)slots[i] * kvDim;
	for (int j = threadIdx.x; j < kvDim; j += blockDim.x) {
		kc[dst + j] = k[(size_t)i * kCols + j];
		vc[dst + j] = v[(size_t)i * vCols + j];
	}
}

#define ATT_THREADS 128
#define ATT_CHUNK 128
#define ATT_MAXD 4 // headDim <= ATT_THREADS * ATT_MAXD

// paged_attention: one block of ATT_THREADS per (head, row); grid (heads,
// rows). rowMeta holds, per row, the offset of its sequence's block table
// in tables and the number of positions it attends to (its own position
// plus one: causal). Keys and values live in kc/vc rows of kvDim values,
// slot = table[p / blockSize] * blockSize + p % blockSize. Scores are
// computed a chunk of positions at a time with an online softmax (running
// max and sum), so any context length fits in fixed shared memory. Dynamic
// shared memory: headDim floats (the query head).
extern "C" __global__ void __launch_bounds__(ATT_THREADS) paged_attention_f32(
	float* out, int outCols, const float* q, int qCols,
	const float* kc, const float* vc, int kvDim,
	const int32_t* tables, const int32_t* rowMeta, int blockSize,
	int heads, int kvHeads, int headDim, float scale)
{
	__shared__ float sc[ATT_CHUNK];
	__shared__ int slots[ATT_CHUNK];
	__shared__ float red[32];
	extern __shared__ float qs[];
	const int h = blockIdx.x, row = blockIdx.y;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
	const int off = (h / (heads / kvHeads)) * headDim;
	const int32_t* table = tables + rowMeta[2 * row];
	const int ctx = rowMeta[2 * row + 1];
	const float* qh = q + (size_t)row * qCols + (size_t)h * headDim;
	for (int d = tid; d < headDim; d += blockDim.x) qs[d] = qh[d];
	__syncthreads();

	float m = -INFINITY, l = 0.f;
	float acc[ATT_MAXD];
#pragma unroll
	for (int k = 0; k < ATT_MAXD; k++) acc[k] = 0.f;

	for (int base = 0; base < ctx; base += ATT_CHUNK) {
		const int cnt = min(ATT_CHUNK, ctx - base);
		for (int p = warp; p < cnt; p += nw) {
			int pos = base + p;
			int slot = table[pos / blockSize] * blockSize + pos % blockSize;
			const float* kr = kc + (size_t)slot * kvDim + off;
			float s = 0.f;
			for (int d = lane; d < headDim; d += 32) s += qs[d] * kr[d];
			s = warp_sum(s);
			if (lane == 0) {
				sc[p] = s * scale;
				slots[p] = slot;
			}
		}
		__syncthreads();
		float cm = -INFINITY;
		for (int p = tid; p < cnt; p += blockDim.x) cm = fmaxf(cm, sc[p]);
		cm = block_max(cm, red);
		const float mNew = fmaxf(m, cm);
		const float corr = expf(m - mNew); // 0 on the first chunk
		for (int p = tid; p < cnt; p += blockDim.x) sc[p] = expf(sc[p] - mNew);
		__syncthreads();
		float cs = 0.f;
		for (int p = tid; p < cnt; p += blockDim.x) cs += sc[p];
		cs = block_sum(cs, red);
		l = l * corr + cs;
#pragma unroll
		for (int k = 0; k < ATT_MAXD; k++) {
			int d = tid + k * blockDim.x;
			if (d < headDim) {
				float a = acc[k] * corr;
				for (int p = 0; p < cnt; p++) a += sc[p] * vc[(size_t)slots[p] * kvDim + off + d];
				acc[k] = a;
			}
		}
		m = mNew;
		__syncthreads();
	}
	const float inv = 1.f / l;
	float* o = out + (size_t)row * outCols + (size_t)h * headDim;
#pragma unroll
	for (int k = 0; k < ATT_MAXD; k++) {
		int d = tid + k * blockDim.x;
		if (d < headDim) o[d] = acc[k] * inv;
	}
}
