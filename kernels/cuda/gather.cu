// Row gathers: token embedding (F32 and Q8_0 tables) and logits-row gather.
#include "common.cuh"

// gather_rows_f32: out row i = src row idx[i]; one block per output row.
// Used for F32 embeddings and for picking the rows that need logits.
extern "C" __global__ void gather_rows_f32(float* out, int outCols, const float* src, int srcCols, const int32_t* idx) {
	int i = blockIdx.x;
	const float* s = src + (size_t)idx[i] * srcCols;
	float* o = out + (size_t)i * outCols;
	for (int j = threadIdx.x; j < srcCols; j += blockDim.x) o[j] = s[j];
}

// embed_q8_0: out row i = dequantized row tok[i] of a Q8_0 table of cols
// values per row (cols a multiple of 32).
extern "C" __global__ void embed_q8_0(float* out, int outCols, const uint8_t* table, int cols, const int32_t* tok) {
	int i = blockIdx.x;
	size_t rowBytes = (size_t)(cols / Q8_BLOCK) * Q8_BLOCK_BYTES;
	const uint8_t* r = table + (size_t)tok[i] * rowBytes;
	float* o = out + (size_t)i * outCols;
	for (int j = threadIdx.x; j < cols; j += blockDim.x) {
		const uint8_t* blk = r + (j / Q8_BLOCK) * Q8_BLOCK_BYTES;
		o[j] = q8_scale(blk) * (float)(int8_t)blk[2 + j % Q8_BLOCK];
	}
}
