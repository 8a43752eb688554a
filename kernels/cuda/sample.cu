// Softmax and token sampling on device: greedy (argmax) and temperature /
// top-k / top-p sampling, one block per logits row, so only the sampled ids
// and their logprobs travel back to the host.
#include "common.cuh"

#define SAMPLE_THREADS 1024
#define BISECT_STEPS 32

// softmax_f32: in place over the first rows of x (cols values each); one
// block per row.
extern "C" __global__ void softmax_f32(float* x, int cols) {
	__shared__ float red[32];
	float* r = x + (size_t)blockIdx.x * cols;
	float m = -INFINITY;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, r[i]);
	m = block_max(m, red);
	float s = 0.f;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) {
		float e = expf(r[i] - m);
		r[i] = e;
		s += e;
	}
	s = block_sum(s, red);
	float inv = 1.f / s;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) r[i] *= inv;
}

// row_argmax returns the largest value's smallest index to every thread.
__device__ void row_argmax(const float* r, int vocab, float* bestVal, int* bestIdx) {
	__shared__ float sv[32];
	__shared__ int si[32];
	float v = -INFINITY;
	int idx = 0x7fffffff;
	for (int i = threadIdx.x; i < vocab; i += blockDim.x)
		if (r[i] > v) { v = r[i]; idx = i; }
	for (int o = 16; o > 0; o >>= 1) {
		float ov = __shfl_xor_sync(FULL_MASK, v, o);
		int oi = __shfl_xor_sync(FULL_MASK, idx, o);
		if (ov > v || (ov == v && oi < idx)) { v = ov; idx = oi; }
	}
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
	__syncthreads();
	if (lane == 0) { sv[warp] = v; si[warp] = idx; }
	__syncthreads();
	v = lane < nw ? sv[lane] : -INFINITY;
	idx = lane < nw ? si[lane] : 0x7fffffff;
	for (int o = 16; o > 0; o >>= 1) {
		float ov = __shfl_xor_sync(FULL_MASK, v, o);
		int oi = __shfl_xor_sync(FULL_MASK, idx, o);
		if (ov > v || (ov == v && oi < idx)) { v = ov; idx = oi; }
	}
	if (idx == 0x7fffffff) idx = 0; // every value NaN or -inf
	*bestVal = v;
	*bestIdx = idx;
}

// row_lse returns log(sum(exp(r))) given the row maximum m.
__device__ float row_lse(const float* r, int vocab, float m, float* red) {
	float s = 0.f;
	for (int i = threadIdx.x; i < vocab; i += blockDim.x) s += expf(r[i] - m);
	s = block_sum(s, red);
	return m + logf(s);
}

// argmax_f32: greedy decoding. ids[i] = argmax of logits row i (ld floats
// apart), logprobs[i] its log-softmax value.
extern "C" __global__ void argmax_f32(const float* logits, int ld, int vocab, int32_t* ids, float* logprobs) {
	__shared__ float red[32];
	const float* r = logits + (size_t)blockIdx.x * ld;
	float m;
	int idx;
	row_argmax(r, vocab, &m, &idx);
	float lse = row_lse(r, vocab, m, red);
	if (threadIdx.x == 0) {
		ids[blockIdx.x] = idx;
		logprobs[blockIdx.x] = m - lse;
	}
}

// kept_stats sums, over logits >= t, a count and the mass exp((l-m)/temp).
__device__ void kept_stats(const float* r, int vocab, float t, float m, float invTemp, float* red, float* count, float* mass) {
	float c = 0.f, s = 0.f;
	for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
		float l = r[i];
		if (l >= t) { c += 1.f; s += expf((l - m) * invTemp); }
	}
	*count = block_sum(c, red);
	*mass = block_sum(s, red);
}

// sample_f32: one draw per row. params holds, per row, 4 floats:
// temperature, top_p, top_k (as a float; <= 0 means all) and u, a uniform
// number in [0, 1) from the host's seeded generator. temperature <= 0 is
// greedy. The kept set is every logit >= the top-k threshold and >= the
// top-p threshold (both found by bisection on the logit value, so ties at
// the boundary are all kept); the token is the first whose cumulative
// mass, in vocabulary order, exceeds u times the kept mass. logprobs are
// of the unprocessed distribution (log-softmax of the raw logits).
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS) sample_f32(const float* logits, int ld, int vocab, const float* params, int32_t* ids, float* logprobs) {
	__shared__ float red[32];
	__shared__ float prefix[SAMPLE_THREADS];
	__shared__ int chosen;
	const float* r = logits + (size_t)blockIdx.x * ld;
	const float temp = params[4 * blockIdx.x + 0];
	const float topP = params[4 * blockIdx.x + 1];
	const float topK = params[4 * blockIdx.x + 2];
	const float u = params[4 * blockIdx.x + 3];

	float m;
	int best;
	row_argmax(r, vocab, &m, &best);
	const float lse = row_lse(r, vocab, m, red);
	if (!(temp > 0.f)) {
		if (threadIdx.x == 0) { ids[blockIdx.x] = best; logprobs[blockIdx.x] = m - lse; }
		return;
	}
	const float invTemp = 1.f / temp;
	float mn = INFINITY;
	for (int i = threadIdx.x; i < vocab; i += blockDim.x) mn = fminf(mn, r[i]);
	mn = -block_max(-mn, red);

	float cnt, mass;
	// top-k: largest t with count(l >= t) >= k.
	float t = mn;
	if (topK > 0.f && topK < (float)vocab) {
		float lo = mn, hi = m;
		for (int it = 0; it < BISECT_STEPS; it++) {
			float mid = lo + (hi - lo) * 0.5f;
			kept_stats(r, vocab, mid, m, invTemp, red, &cnt, &mass);
			if (cnt >= topK) lo = mid; else hi = mid;
		}
		t = lo;
	}
	kept_stats(r, vocab, t, m, invTemp, red, &cnt, &mass);
	// top-p: largest t' >= t whose kept mass is still >= topP of the top-k mass.
	if (topP > 0.f && topP < 1.f) {
		const float want = topP * mass;
		float lo = t, hi = m;
		for (int it = 0; it < BISECT_STEPS; it++) {
			float mid = lo + (hi - lo) * 0.5f;
			float c2, m2;
			kept_stats(r, vocab, mid, m, invTemp, red, &c2, &m2);
			if (m2 >= want) lo = mid; else hi = mid;
		}
		t = lo;
		kept_stats(r, vocab, t, m, invTemp, red, &cnt, &mass);
	}

	// Inverse-CDF draw in vocabulary order: each thread owns a contiguous
	// span, an inclusive block scan of the span masses finds the one span
	// [before, incl) that holds the target, then its thread finds the token.
	const int span = (vocab + blockDim.x - 1) / blockDim.x;
	const int lo = threadIdx.x * span, hi = min(vocab, lo + span);
	float s = 0.f;
	for (int i = lo; i < hi; i++) if (r[i] >= t) s += expf((r[i] - m) * invTemp);
	prefix[threadIdx.x] = s;
	if (threadIdx.x == 0) chosen = 0x7fffffff;
	__syncthreads();
	for (int o = 1; o < blockDim.x; o <<= 1) { // Hillis-Steele inclusive scan
		float add = threadIdx.x >= o ? prefix[threadIdx.x - o] : 0.f;
		__syncthreads();
		prefix[threadIdx.x] += add;
		__syncthreads();
	}
	const float total = prefix[blockDim.x - 1];
	const float target = fminf(u, 1.f) * total;
	const float incl = prefix[threadIdx.x];
	const float before = threadIdx.x > 0 ? prefix[threadIdx.x - 1] : 0.f;
	const bool last = incl >= total; // the final span with mass takes rounding overflow
	if (s > 0.f && target >= before && (target < incl || last)) {
		float acc = before;
		int pick = -1;
		for (int i = lo; i < hi; i++) {
			if (r[i] < t) continue;
			pick = i;
			acc += expf((r[i] - m) * invTemp);
			if (acc > target) break;
		}
		if (pick >= 0) atomicMin(&chosen, pick); // one span matches; min breaks a rounding tie
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		int id = chosen != 0x7fffffff ? chosen : best;
		ids[blockIdx.x] = id;
		logprobs[blockIdx.x] = r[id] - lse;
	}
}
