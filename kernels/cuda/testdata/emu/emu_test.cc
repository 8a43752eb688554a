// emu_test.cc: runs every Sluice CUDA kernel on the CPU SIMT emulator
// (emu.h) and compares it with plain loops. Built and run by
// scripts/cuda-emu.sh; kernels.cu.inc is the .cu sources with the one
// construct the emulator cannot take (extern __shared__) rewritten.
#include <math.h>
#include <cstdio>
#include <random>
#include "emu.h"
#include "kernels.cu.inc"

static std::mt19937 rng(7);
static std::vector<float> randv(size_t n, float scale = 1.f) {
	std::uniform_real_distribution<float> d(-scale, scale);
	std::vector<float> v(n);
	for (auto& x : v) x = d(rng);
	return v;
}
static double relerr(const std::vector<float>& got, const std::vector<float>& want) {
	double d = 0, w = 0;
	for (size_t i = 0; i < want.size(); i++) {
		double x = (double)got[i] - want[i];
		d += x * x;
		w += (double)want[i] * want[i];
	}
	return sqrt(d / std::max(w, 1e-30));
}
static int failures = 0;
static void expect(const char* what, double err, double tol) {
	bool ok = err <= tol;
	printf("%-28s rel err %.3g %s\n", what, err, ok ? "ok" : "FAIL");
	if (!ok) failures++;
}

static void test_rmsnorm() {
	int rows = 3, cols = 96, c = 32;
	auto x = randv(rows * cols), w = randv(c), out = std::vector<float>(rows * cols), want = out;
	for (int k = 0; k < rows * cols / c; k++) {
		float ss = 0;
		for (int i = 0; i < c; i++) ss += x[k * c + i] * x[k * c + i];
		float inv = (float)(1 / sqrt((double)(ss / c + 1e-5f)));
		for (int i = 0; i < c; i++) want[k * c + i] = x[k * c + i] * inv * w[i];
	}
	launch({(unsigned)(rows * cols / c)}, {32}, 0, [&] { rmsnorm_f32(out.data(), x.data(), w.data(), c, 1e-5f); });
	expect("rmsnorm (per head)", relerr(out, want), 1e-6);
}

static void test_simple() {
	int rows = 4, cols = 300, n = 3;
	long long total = (long long)n * cols;
	auto a = randv(rows * cols, 6.f), b = randv(rows * cols), bias = randv(cols);
	std::vector<float> out(rows * cols), want(rows * cols);
	for (long long i = 0; i < total; i++) want[i] = a[i] / (1.f + expf(-a[i])) * b[i];
	launch({2}, {256}, 0, [&] { silu_mul_f32(out.data(), a.data(), b.data(), total); });
	expect("silu_mul", relerr(out, want), 1e-6);
	for (long long i = 0; i < total; i++) want[i] = a[i] + b[i];
	launch({2}, {256}, 0, [&] { add_f32(out.data(), a.data(), b.data(), total); });
	expect("add", relerr(out, want), 0);
	want = a;
	for (long long i = 0; i < total; i++) want[i] += bias[i % cols];
	launch({3}, {256}, 0, [&] { add_row_f32(a.data(), bias.data(), cols, total); });
	expect("add_row (rows past n untouched)", relerr(a, want), 0);

	std::vector<int32_t> idx = {3, 0, 2};
	std::vector<float> g(4 * cols, 0.f), gwant(4 * cols, 0.f);
	for (size_t i = 0; i < idx.size(); i++)
		for (int j = 0; j < cols; j++) gwant[i * cols + j] = b[idx[i] * cols + j];
	launch({(unsigned)idx.size()}, {256}, 0, [&] { gather_rows_f32(g.data(), cols, b.data(), cols, idx.data()); });
	expect("gather_rows", relerr(g, gwant), 0);

	// full-row RMSNorm with a 256-thread block over 300 values
	auto w = randv(cols);
	for (int r = 0; r < n; r++) {
		float ss = 0;
		for (int i = 0; i < cols; i++) ss += b[r * cols + i] * b[r * cols + i];
		float inv = (float)(1 / sqrt((double)(ss / cols + 1e-6f)));
		for (int i = 0; i < cols; i++) want[r * cols + i] = b[r * cols + i] * inv * w[i];
	}
	std::vector<float> nb(b.begin(), b.begin() + n * cols), nwant(want.begin(), want.begin() + n * cols);
	launch({(unsigned)n}, {256}, 0, [&] { rmsnorm_f32(nb.data(), nb.data(), w.data(), cols, 1e-6f); });
	expect("rmsnorm (row, in place)", relerr(nb, nwant), 1e-6);
}

static void test_rope(int style) {
	int rows = 3, headDim = 16, heads = 3, cols = heads * headDim, maxPos = 64, half = headDim / 2;
	auto x = randv(rows * cols), table = std::vector<float>(maxPos * headDim);
	for (int p = 0; p < maxPos; p++)
		for (int j = 0; j < half; j++) {
			double f = pow(10000, -2.0 * j / headDim);
			table[p * headDim + j] = (float)cos(p * f);
			table[p * headDim + half + j] = (float)sin(p * f);
		}
	std::vector<int32_t> pos = {0, 5, 63};
	auto want = x;
	for (int r = 0; r < rows; r++)
		for (int h = 0; h < heads; h++)
			for (int j = 0; j < half; j++) {
				float c = table[pos[r] * headDim + j], s = table[pos[r] * headDim + half + j];
				int a = style ? j : 2 * j, b = style ? j + half : 2 * j + 1;
				float* hd = &want[r * cols + h * headDim];
				float x0 = hd[a], x1 = hd[b];
				hd[a] = x0 * c - x1 * s;
				hd[b] = x0 * s + x1 * c;
			}
	int pairs = cols / headDim * half;
	launch({(unsigned)((pairs + 127) / 128), (unsigned)rows}, {128}, 0,
	       [&] { rope_f32(x.data(), cols, pos.data(), table.data(), headDim, headDim, style); });
	expect(style ? "rope (half)" : "rope (interleaved)", relerr(x, want), 1e-6);
}

// q8 packs v (a multiple of 32) as Q8_0 with scale bits of a power of two
// (exact in half precision).
static std::vector<uint8_t> q8(const std::vector<float>& v, std::vector<float>& deq) {
	std::vector<uint8_t> out(v.size() / 32 * 34);
	deq.resize(v.size());
	for (size_t b = 0; b < v.size() / 32; b++) {
		uint16_t bits = 0x2000 + (uint16_t)(b % 4) * 0x400; // 2^-7 .. 2^-4
		out[b * 34] = bits & 0xff;
		out[b * 34 + 1] = bits >> 8;
		float d = __half2float(__ushort_as_half(bits));
		for (int j = 0; j < 32; j++) {
			int8_t q = (int8_t)std::clamp((int)lrintf(v[b * 32 + j] * 100), -127, 127);
			out[b * 34 + 2 + j] = (uint8_t)q;
			deq[b * 32 + j] = d * q;
		}
	}
	return out;
}

static void test_q8(int n, int in) {
	int outDim = 37;
	std::vector<float> wdeq, x = randv(n * in);
	auto w = q8(randv(outDim * in), wdeq);
	std::vector<float> out(n * outDim), want(n * outDim);
	for (int r = 0; r < n; r++)
		for (int o = 0; o < outDim; o++) {
			double s = 0;
			for (int k = 0; k < in; k++) s += (double)x[r * in + k] * wdeq[o * in + k];
			want[r * outDim + o] = (float)s;
		}
	char what[96];
	launch({(unsigned)((outDim + 3) / 4), (unsigned)((n + 7) / 8)}, {128}, 0,
	       [&] { matmul_q8_0(out.data(), outDim, x.data(), in, w.data(), in, outDim, n); });
	snprintf(what, sizeof what, "matmul_q8_0 (%d rows, %d cols)", n, in);
	expect(what, relerr(out, want), 1e-5);

	// The same weights widened (a grid smaller than the values: the loop strides).
	std::vector<float> wide(outDim * in, -1.f);
	launch({3}, {256}, 0, [&] { dequant_q8_0(wide.data(), w.data(), (long long)wide.size()); });
	expect("dequant_q8_0", relerr(wide, wdeq), 0);
	if (in != 128) return;

	std::vector<int32_t> tok = {5, 0, 36};
	std::vector<float> emb(tok.size() * in), ewant(tok.size() * in);
	for (size_t i = 0; i < tok.size(); i++)
		for (int j = 0; j < in; j++) ewant[i * in + j] = wdeq[tok[i] * in + j];
	launch({(unsigned)tok.size()}, {128}, 0, [&] { embed_q8_0(emb.data(), in, w.data(), in, tok.data()); });
	expect("embed_q8_0", relerr(emb, ewant), 0);
}

static void test_attention() {
	// three sequences: a fresh prefill, a decode deep in its context, a
	// chunked prefill; GQA 8 heads over 2 kv heads; scrambled tables
	int heads = 8, kvHeads = 2, headDim = 64, bs = 16, kvDim = kvHeads * headDim, qdim = heads * headDim;
	std::vector<int32_t> nrows = {7, 1, 5}, ctx = {7, 300, 21};
	std::vector<int32_t> tables, tableStart = {0}, slots, meta;
	int next = 0, total = 0;
	for (size_t s = 0; s < ctx.size(); s++) {
		int nb = (ctx[s] + bs - 1) / bs;
		for (int k = 0; k < nb; k++) tables.push_back(next + nb - 1 - k);
		next += nb;
		for (int p = ctx[s] - nrows[s]; p < ctx[s]; p++) {
			slots.push_back(tables[tableStart[s] + p / bs] * bs + p % bs);
			meta.push_back(tableStart[s]);
			meta.push_back(p + 1);
		}
		tableStart.push_back((int)tables.size());
		total += nrows[s];
	}
	auto kc = randv(next * bs * kvDim), vc = randv(next * bs * kvDim);
	auto k = randv(total * kvDim), v = randv(total * kvDim), q = randv(total * qdim);
	launch({(unsigned)total}, {128}, 0,
	       [&] { write_kv_f32(kc.data(), vc.data(), k.data(), v.data(), kvDim, kvDim, kvDim, slots.data()); });
	double werr = 0;
	for (int i = 0; i < total; i++)
		for (int j = 0; j < kvDim; j++) werr += fabs(kc[slots[i] * kvDim + j] - k[i * kvDim + j]) + fabs(vc[slots[i] * kvDim + j] - v[i * kvDim + j]);
	expect("write_kv", werr, 0);

	float scale = 1 / sqrtf((float)headDim);
	std::vector<float> out(total * qdim), want(total * qdim);
	for (int r = 0; r < total; r++) {
		const int32_t* table = &tables[meta[2 * r]];
		int n = meta[2 * r + 1];
		for (int h = 0; h < heads; h++) {
			int off = h / (heads / kvHeads) * headDim;
			std::vector<double> sc(n);
			double m = -1e300, sum = 0;
			for (int p = 0; p < n; p++) {
				int slot = table[p / bs] * bs + p % bs;
				double s = 0;
				for (int d = 0; d < headDim; d++) s += (double)q[r * qdim + h * headDim + d] * kc[slot * kvDim + off + d];
				sc[p] = s * scale;
				m = std::max(m, sc[p]);
			}
			for (auto& s : sc) sum += (s = exp(s - m));
			for (int d = 0; d < headDim; d++) {
				double a = 0;
				for (int p = 0; p < n; p++) a += sc[p] / sum * vc[(table[p / bs] * bs + p % bs) * kvDim + off + d];
				want[r * qdim + h * headDim + d] = (float)a;
			}
		}
	}
	launch({(unsigned)heads, (unsigned)total}, {128}, headDim, [&] {
		paged_attention_f32(out.data(), qdim, q.data(), qdim, kc.data(), vc.data(), kvDim, tables.data(), meta.data(), bs,
		                    heads, kvHeads, headDim, scale);
	});
	expect("paged_attention", relerr(out, want), 1e-5);
}

static void test_softmax_argmax() {
	int rows = 2, vocab = 3000;
	auto x = randv(rows * vocab, 8.f);
	x[1 * vocab + 2999] = 40; // the last index wins row 1
	auto want = x;
	std::vector<int32_t> wantID(rows);
	std::vector<float> wantLP(rows);
	for (int r = 0; r < rows; r++) {
		float* row = &want[r * vocab];
		int best = (int)(std::max_element(row, row + vocab) - row);
		double m = row[best], s = 0;
		for (int i = 0; i < vocab; i++) s += exp(row[i] - m);
		wantID[r] = best;
		wantLP[r] = (float)(-log(s));
		for (int i = 0; i < vocab; i++) row[i] = (float)(exp(row[i] - m) / s);
	}
	std::vector<int32_t> ids(rows);
	std::vector<float> lps(rows);
	launch({(unsigned)rows}, {1024}, 0, [&] { argmax_f32(x.data(), vocab, vocab, ids.data(), lps.data()); });
	expect("argmax ids", ids == wantID ? 0 : 1, 0);
	expect("argmax logprobs", relerr(lps, wantLP), 1e-5);
	launch({(unsigned)rows}, {1024}, 0, [&] { softmax_f32(x.data(), vocab); });
	expect("softmax", relerr(x, want), 1e-5);
}

// draw is sample_f32's rule on the host: top-k, then top-p of that, then
// the inverse CDF at u in vocabulary order.
static int draw(const float* row, int vocab, float temp, float topP, int topK, float u) {
	std::vector<int> idx(vocab);
	for (int i = 0; i < vocab; i++) idx[i] = i;
	std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return row[a] > row[b]; });
	double m = row[idx[0]];
	auto w = [&](int i) { return exp((row[i] - m) / temp); };
	int keep = vocab;
	if (topK > 0 && topK < keep) keep = topK;
	if (topP > 0 && topP < 1) {
		double tot = 0, acc = 0;
		for (int k = 0; k < keep; k++) tot += w(idx[k]);
		for (int k = 0; k < keep; k++)
			if ((acc += w(idx[k])) >= topP * tot) { keep = k + 1; break; }
	}
	std::vector<bool> kept(vocab);
	double mass = 0, acc = 0;
	for (int k = 0; k < keep; k++) kept[idx[k]] = true, mass += w(idx[k]);
	for (int i = 0; i < vocab; i++)
		if (kept[i] && (acc += w(i)) > u * mass) return i;
	return idx[0];
}

static void test_sample() {
	int vocab = 1000;
	struct P { float temp, topP, topK, u; };
	std::vector<P> ps = {{0, 0, 0, .5f}, {1, 0, 1, .9f}, {.7f, 0, 20, .3f}, {1, .9f, 0, .61f}, {1.3f, .5f, 50, .05f}, {1, 0, 0, .999f}};
	int rows = (int)ps.size();
	auto x = randv(rows * vocab, 4.f);
	std::vector<float> params;
	for (auto& p : ps) params.insert(params.end(), {p.temp, p.topP, p.topK, p.u});
	std::vector<int32_t> ids(rows);
	std::vector<float> lps(rows);
	launch({(unsigned)rows}, {1024}, 0, [&] { sample_f32(x.data(), vocab, vocab, params.data(), ids.data(), lps.data()); });
	int bad = 0;
	for (int r = 0; r < rows; r++) {
		const P& p = ps[r];
		int want = p.temp <= 0 ? draw(&x[r * vocab], vocab, 1, 0, 1, 0) : draw(&x[r * vocab], vocab, p.temp, p.topP, (int)p.topK, p.u);
		if (ids[r] != want) {
			printf("  sample row %d: got %d want %d\n", r, ids[r], want);
			bad++;
		}
	}
	expect("sample (top-k/top-p/temp)", bad, 0);
}

int main() {
	test_simple();
	test_rmsnorm();
	test_rope(0);
	test_rope(1);
	test_q8(1, 128);
	test_q8(11, 128);
	test_q8(3, 160); // 5 blocks: a warp pass with lanes past the last block
	test_q8(17, 96);
	test_attention();
	test_softmax_argmax();
	test_sample();
	if (failures) {
		printf("%d FAILED\n", failures);
		return 1;
	}
	printf("all kernels match on the emulator\n");
	return 0;
}
