// Row-wise and element-wise kernels: RMSNorm, RoPE, SiLU-gate, residual adds.
#include "common.cuh"

// rmsnorm: one block per chunk of c values (c = w's width), n*cols/c chunks.
// out = x / sqrt(mean(x^2) + eps) * w. out may alias x.
extern "C" __global__ void rmsnorm_f32(float* out, const float* x, const float* w, int c, float eps) {
	__shared__ float scratch[32];
	const float* xr = x + (size_t)blockIdx.x * c;
	float* orow = out + (size_t)blockIdx.x * c;
	float ss = 0.f;
	for (int i = threadIdx.x; i < c; i += blockDim.x) ss += xr[i] * xr[i];
	ss = block_sum(ss, scratch);
	float inv = (float)(1.0 / sqrt((double)(ss / (float)c + eps)));
	for (int i = threadIdx.x; i < c; i += blockDim.x) orow[i] = xr[i] * inv * w[i];
}

// rope: rotates every whole headDim-long head of rows [0, gridDim.y) in
// place. table row p (tableCols apart) holds headDim/2 cosines then
// headDim/2 sines. style 0 pairs (2j, 2j+1); style 1 pairs (j, j+headDim/2).
extern "C" __global__ void rope_f32(float* x, int cols, const int32_t* pos, const float* table, int tableCols, int headDim, int style) {
	int row = blockIdx.y;
	int half = headDim / 2;
	int pairs = cols / headDim * half;
	const float* cs = table + (size_t)pos[row] * tableCols;
	float* xr = x + (size_t)row * cols;
	for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < pairs; t += gridDim.x * blockDim.x) {
		int h = t / half, j = t % half;
		float* hd = xr + h * headDim;
		int a = style == 1 ? j : 2 * j;
		int b = style == 1 ? j + half : 2 * j + 1;
		float c = cs[j], s = cs[half + j];
		float x0 = hd[a], x1 = hd[b];
		hd[a] = x0 * c - x1 * s;
		hd[b] = x0 * s + x1 * c;
	}
}

// silu_mul: out[i] = silu(gate[i]) * up[i] for i < total. out may alias gate.
extern "C" __global__ void silu_mul_f32(float* out, const float* gate, const float* up, long long total) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
		float g = gate[i];
		out[i] = g / (1.f + expf(-g)) * up[i];
	}
}

// add: out[i] = a[i] + b[i]. out may alias a or b.
extern "C" __global__ void add_f32(float* out, const float* a, const float* b, long long total) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x)
		out[i] = a[i] + b[i];
}

// add_row: x[r][j] += b[j] for the first total = n*cols elements.
extern "C" __global__ void add_row_f32(float* x, const float* b, int cols, long long total) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x)
		x[i] += b[i % cols];
}
