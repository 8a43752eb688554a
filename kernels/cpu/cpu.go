// Package cpu is the fast CPU backend: kernels.Backend over host tensors,
// with AVX-512 assembly for the F32 and Q8_0 dot-product kernels
// (dot_amd64.s, used when golang.org/x/sys/cpu reports AVX512F/BW/VL), AVX2
// assembly for the kernels on stored weight encodings (qdot_amd64.s; see
// qmat.go for their numeric contract) and plain-Go twins used elsewhere and
// under the purego build tag. Work is split over a small persistent worker
// pool (one worker per thread, woken per op through a channel; no goroutine
// per op), and the steady state allocates nothing: per-worker scratch grows
// on first use.
//
// Weights of every stored encoding (F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K,
// Q6_K, MXFP4) are used in place, as the model file holds them: MatMul on
// them streams each weight row once and multiplies it, from L1, with every
// activation row of the batch (qmat.go, mxfp4.go), with activations
// quantized to int8 once per MatMul for the block-quantized types.
// MatMulExperts (experts.go) runs a mixture-of-experts batch, grouped by
// expert, through the experts' weights in one parallel op.
//
// Where llama.cpp rounds, this backend rounds the same way, so that a
// quantized model served here gives llama.cpp's log-probabilities (issue
// 17: within 0.08 on llama.cpp's own files): activations meeting
// block-quantized weights are quantized as ggml's Q8_0/Q8_K (qmat.go);
// RMSNorm sums float32 squares in float64 and scales as ggml's rms_norm
// (rmsScale); RoPE rotates with ggml's fused products (rotate) on a table
// of ggml's angles (kernels.RoPETableGGML, chosen by the loader for
// unscaled RoPE); and with an F16 KV cache (Options.KVF16), attention
// rounds each query to float16 before its products with the keys and each
// probability to float16 before its products with the values, as ggml's
// mul_mat does with F16 operands (softmaxF16), and without AVX-512 sums
// those products in ggml's order (attn16.go). What remains different is
// the float32 summation order of the AVX2 integer kernels (see qmat.go).
//
// F32 matrix products are computed as dot products along the weights' rows
// (PyTorch's [out × in] layout): a 4×4 register tile of activation rows ×
// weight rows for batches (prefill and batched decode), a 1×4 tile for a
// single row. Q8_0 weights without quantized activations use a dequantized
// 4-row weight tile fed to the F32 tile for batches of 4 rows or more and
// a fused dequantize-and-dot below that.
package cpu

import (
	"math"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// Options configure a Backend.
type Options struct {
	// Threads is the number of threads (workers including the caller);
	// 0 means GOMAXPROCS.
	Threads int
	// Plain disables the assembly kernels (for tests and comparison).
	Plain bool
	// QuantizeActivations quantizes the activation rows that meet Q8_0
	// weights to int8 as ggml's quantize_row_q8_0 does (blocks of 32,
	// float16 scale), for any number of rows, and multiplies with integer
	// dot products (AVX512_VNNI where present), as llama.cpp does. The
	// rounding adds at most 0.57·d·Σ|w| per block to a product (d = block
	// max|x|/127), typically under 0.5 % relative. Off, Q8_0 products equal
	// the reference on the dequantized weights to float rounding. (The
	// other block-quantized types always meet quantized activations.)
	QuantizeActivations bool
	// KVF16 makes AllocKV hold the KV cache as float16 (see kv16.go);
	// attention then also rounds queries and probabilities to float16, as
	// ggml does with an F16 cache.
	KVF16 bool
}

// Backend is the CPU implementation of kernels.Backend. Its methods must be
// called from one goroutine at a time.
type Backend struct {
	k     kern
	pool  *pool
	kvF16 bool

	mm   matmulTask
	qm   qmatTask
	ex   expertsTask
	mxe  mxfp4ExactTask
	pt   panelTask
	att  attnTask
	norm normTask
	silu siluTask
	rope ropeTask
}

var (
	_ kernels.Backend        = (*Backend)(nil)
	_ kernels.ExpertOps      = (*Backend)(nil)
	_ kernels.ExpertMatMuler = (*Backend)(nil)
)

// New starts a CPU backend and its workers; Close stops them.
func New(o Options) *Backend {
	b := &Backend{k: kern{simd: hasAVX512 && !o.Plain, vnni: hasVNNI && !o.Plain, avx2: hasAVX2 && !o.Plain}}
	b.mm.q8act = o.QuantizeActivations
	b.kvF16 = o.KVF16
	b.pool = newPool(o.Threads)
	n := b.pool.n
	b.mm.scratch = make([][]float32, n)
	b.att.scores = make([][]float32, n)
	return b
}

// Threads returns the number of threads the backend uses.
func (b *Backend) Threads() int { return b.pool.n }

// SIMD reports whether the assembly kernels are in use.
func (b *Backend) SIMD() bool { return b.k.simd }

// Name returns "cpu".
func (b *Backend) Name() string { return "cpu" }

// Close stops the workers.
func (b *Backend) Close() { b.pool.close() }

// Weight makes a host tensor over data, which may be a read-only memory
// map: every type (F32 when 4-byte aligned, F16, BF16, Q8_0, Q4_0, Q4_K,
// Q5_K, Q6_K, MXFP4) is used in place, never copied or written.
func (b *Backend) Weight(dt kernels.DType, rows, cols int, data []byte) (kernels.Tensor, error) {
	return kernels.NewHostWeight(dt, rows, cols, data)
}

// WeightF32 makes a host tensor over data.
func (b *Backend) WeightF32(rows, cols int, data []float32) (kernels.Tensor, error) {
	return &kernels.Host{R: rows, C: cols, DT: kernels.F32, F: data}, nil
}

// Alloc makes a zeroed F32 tensor.
func (b *Backend) Alloc(rows, cols int) kernels.Tensor {
	return &kernels.Host{R: rows, C: cols, DT: kernels.F32, F: make([]float32, rows*cols)}
}

// ToHost returns the first n rows of t (a view, not a copy).
func (b *Backend) ToHost(t kernels.Tensor, n int) []float32 {
	h := t.(*kernels.Host)
	return h.F[:n*h.C]
}

// MatMul sets out[:n] = x[:n] · wᵀ.
func (b *Backend) MatMul(out, x, w kernels.Tensor, n int) {
	if wh := w.(*kernels.Host); wh.P != nil && n > 0 {
		b.matmulPanels(out.(*kernels.Host), x.(*kernels.Host), wh, n)
		return
	}
	if wh := w.(*kernels.Host); n > 0 && b.stored(wh, n) {
		b.matmulStored(out.(*kernels.Host), x.(*kernels.Host), wh, n)
		return
	}
	t := &b.mm
	t.k, t.out, t.x, t.w, t.n = b.k, out.(*kernels.Host), x.(*kernels.Host), w.(*kernels.Host), n
	t.xq = nil
	if t.q8act && t.w.DT == kernels.Q8_0 && n < 4 && t.w.S != nil && t.w.C%kernels.Q8Block == 0 {
		t.quantizeX()
	}
	work := n * t.w.R * t.w.C
	if work < 1<<15 {
		t.run(0, t.w.R, 0)
	} else {
		b.pool.parallel(t.w.R, 16, 0, t)
	}
	t.out, t.x, t.w = nil, nil, nil
}

// stored reports whether MatMul with w takes the stored-encoding path of
// qmat.go: every type but F32 and Q8_0, and Q8_0 with quantized
// activations (for any number of rows, so that prefill rounds its
// activations as decode and llama.cpp do) unless the weight carries
// decoded scales for the AVX512_VNNI kernel and there are fewer than 4
// rows.
func (b *Backend) stored(w *kernels.Host, n int) bool {
	switch w.DT {
	case kernels.F32:
		return false
	case kernels.Q8_0:
		if !b.mm.q8act {
			return false
		}
		return !(n < 4 && w.S != nil && b.k.vnni)
	}
	return true
}

// matmulTask computes a range of output columns (weight rows).
type matmulTask struct {
	k         kern
	out, x, w *kernels.Host
	n         int
	scratch   [][]float32

	// q8act enables quantized activations; xq and xd hold them for the
	// current op (xq nil otherwise), xqBuf and xdBuf their storage.
	q8act bool
	xq    []int8
	xd    []float32
	xqBuf []int8
	xdBuf []float32
}

// quantizeX quantizes the op's n activation rows (K columns each) into xq
// and xd, K and K/32 apart.
func (t *matmulTask) quantizeX() {
	K := t.w.C
	nb := K / kernels.Q8Block
	if cap(t.xqBuf) < t.n*K {
		t.xqBuf = make([]int8, t.n*K)
	}
	if cap(t.xdBuf) < t.n*nb {
		t.xdBuf = make([]float32, t.n*nb)
	}
	t.xq, t.xd = t.xqBuf[:t.n*K], t.xdBuf[:t.n*nb]
	for m := 0; m < t.n; m++ {
		quantizeQ8Act(t.x.F[m*t.x.C:m*t.x.C+K], t.xq[m*K:(m+1)*K], t.xd[m*nb:(m+1)*nb])
	}
}

// mChunk bounds the activation rows one pass keeps hot in cache.
const mChunk = 256

func (t *matmulTask) run(lo, hi, wk int) {
	x, w, out := t.x, t.w, t.out
	K := w.C
	xs, os := x.C, out.C
	q8 := w.DT == kernels.Q8_0
	ws := w.DT.RowBytes(K)
	var acc16 [16]float32
	var acc4 [4]float32
	for m0 := 0; m0 < t.n; m0 += mChunk {
		mEnd := min(t.n, m0+mChunk)
		o := lo
		for ; o+4 <= hi; o += 4 {
			var wf []float32
			wstride := K
			if q8 {
				if mEnd-m0 >= 4 {
					if cap(t.scratch[wk]) < 4*K {
						t.scratch[wk] = make([]float32, 4*K)
					}
					wf = t.scratch[wk][:4*K]
					t.k.dequantRows(wf, w.Q[o*ws:], ws, 4, K)
				}
			} else {
				wf = w.F[o*K:]
			}
			m := m0
			if wf != nil {
				for ; m+4 <= mEnd; m += 4 {
					t.k.dot4x4(x.F[m*xs:], xs, wf, wstride, K, &acc16)
					for r := 0; r < 4; r++ {
						copy(out.F[(m+r)*os+o:(m+r)*os+o+4], acc16[r*4:r*4+4])
					}
				}
			}
			for ; m < mEnd; m++ {
				if t.xq != nil {
					nb := K / kernels.Q8Block
					t.k.dotq8q8x4(t.xq[m*K:(m+1)*K], t.xd[m*nb:(m+1)*nb], w.Q[o*ws:], ws, w.S[o*nb:], nb, nb, &acc4)
				} else if q8 {
					var sc []float32
					if w.S != nil {
						sc = w.S[o*(K/kernels.Q8Block):]
					}
					t.k.dotq8x4(x.F[m*xs:m*xs+K], w.Q[o*ws:], ws, sc, K/kernels.Q8Block, K, &acc4)
				} else {
					t.k.dot1x4(x.F[m*xs:m*xs+K], wf, wstride, K, &acc4)
				}
				copy(out.F[m*os+o:m*os+o+4], acc4[:])
			}
		}
		for ; o < hi; o++ {
			for m := m0; m < mEnd; m++ {
				xr := x.F[m*xs : m*xs+K]
				if t.xq != nil {
					nb := K / kernels.Q8Block
					out.F[m*os+o] = dotQ8Q8Go(t.xq[m*K:(m+1)*K], t.xd[m*nb:(m+1)*nb], w.Q[o*ws:(o+1)*ws], nb)
				} else if q8 {
					out.F[m*os+o] = dotQ8Go(xr, w.Q[o*ws:(o+1)*ws])
				} else {
					out.F[m*os+o] = t.k.dot(xr, w.F[o*K:(o+1)*K])
				}
			}
		}
	}
}

// AddRow adds the one-row tensor bias to each of the first n rows of x.
func (b *Backend) AddRow(x, bias kernels.Tensor, n int) {
	xh, bh := x.(*kernels.Host), bias.(*kernels.Host)
	for i := 0; i < n; i++ {
		row := xh.F[i*xh.C : (i+1)*xh.C]
		for j, v := range bh.F[:len(row)] {
			row[j] += v
		}
	}
}

// Add sets out[:n] = a[:n] + b[:n].
func (b *Backend) Add(out, a, c kernels.Tensor, n int) {
	oh, ah, ch := out.(*kernels.Host), a.(*kernels.Host), c.(*kernels.Host)
	m := n * oh.C
	of, af, cf := oh.F[:m], ah.F[:m], ch.F[:m]
	for i := range of {
		of[i] = af[i] + cf[i]
	}
}

// RMSNorm normalizes each w.Cols()-long chunk of the first n rows of x.
func (b *Backend) RMSNorm(out, x, w kernels.Tensor, n int, eps float32) {
	t := &b.norm
	t.k, t.out, t.x, t.w, t.eps = b.k, out.(*kernels.Host), x.(*kernels.Host), w.(*kernels.Host), eps
	chunks := n * t.x.C / t.w.C
	b.pool.parallel(chunks, 1, 64, t)
	t.out, t.x, t.w = nil, nil, nil
}

type normTask struct {
	k         kern
	out, x, w *kernels.Host
	eps       float32
}

// rmsScale returns 1/sqrt(mean(x²)+eps) computed as ggml's rms_norm does
// (float32 squares summed in float64, the mean rounded to float32, a
// float32 square root): RMSNorm's output is then (x·scale)·w bit for bit
// as llama.cpp's rms_norm followed by its multiplication by the weight,
// which keeps the int8 activation rounding that follows (see qmat.go)
// identical.
func rmsScale(x []float32, eps float32) float32 {
	var ss float64
	for _, v := range x {
		ss += float64(v * v)
	}
	mean := float32(ss / float64(len(x)))
	return 1 / float32(math.Sqrt(float64(mean+eps)))
}

func (t *normTask) run(lo, hi, _ int) {
	c := t.w.C
	for i := lo; i < hi; i++ {
		xr := t.x.F[i*c : (i+1)*c]
		or := t.out.F[i*c : (i+1)*c]
		inv := rmsScale(xr, t.eps)
		for j, v := range xr {
			or[j] = (v * inv) * t.w.F[j]
		}
	}
}

// SiLUMul sets out[:n] = silu(gate[:n]) * up[:n].
func (b *Backend) SiLUMul(out, gate, up kernels.Tensor, n int) {
	t := &b.silu
	t.k, t.out, t.gate, t.up = b.k, out.(*kernels.Host), gate.(*kernels.Host), up.(*kernels.Host)
	b.pool.parallel(n*t.out.C, 1024, 8192, t)
	t.out, t.gate, t.up = nil, nil, nil
}

type siluTask struct {
	k             kern
	out, gate, up *kernels.Host
}

func (t *siluTask) run(lo, hi, _ int) {
	t.k.siluMul(t.out.F[lo:hi], t.gate.F[lo:hi], t.up.F[lo:hi])
}

// RoPE rotates each headDim-long head of the first len(pos) rows of x.
func (b *Backend) RoPE(x kernels.Tensor, pos []int32, table kernels.Tensor, headDim int, style kernels.RoPEStyle) {
	t := &b.rope
	t.x, t.pos, t.table, t.headDim, t.style = x.(*kernels.Host), pos, table.(*kernels.Host), headDim, style
	b.pool.parallel(len(pos), 1, 32, t)
	t.x, t.pos, t.table = nil, nil, nil
}

type ropeTask struct {
	x       *kernels.Host
	pos     []int32
	table   *kernels.Host
	headDim int
	style   kernels.RoPEStyle
}

func (t *ropeTask) run(lo, hi, _ int) {
	hd := t.headDim
	half := hd / 2
	for i := lo; i < hi; i++ {
		row := t.x.F[i*t.x.C : (i+1)*t.x.C]
		cs := t.table.F[int(t.pos[i])*t.table.C:]
		cos, sin := cs[:half], cs[half:2*half]
		for h := 0; h+hd <= len(row); h += hd {
			head := row[h : h+hd]
			if t.style == kernels.RoPEHalf {
				lo, hi := head[:half], head[half:hd]
				for j := range lo {
					lo[j], hi[j] = rotate(lo[j], hi[j], cos[j], sin[j])
				}
			} else {
				for j := 0; j < half; j++ {
					head[2*j], head[2*j+1] = rotate(head[2*j], head[2*j+1], cos[j], sin[j])
				}
			}
		}
	}
}

// rotate returns (x0·c − x1·s, x0·s + x1·c) with each second product fused
// into the first as ggml's compiled rope does (fma(x0, c, −x1·s),
// fma(x0, s, x1·c)), so that the rotation equals llama.cpp's bit for bit.
func rotate(x0, x1, c, s float32) (float32, float32) {
	return fma32(x0, c, -(x1 * s)), fma32(x0, s, x1*c)
}

// Embed sets out row i to row tokens[i] of table.
func (b *Backend) Embed(out, table kernels.Tensor, tokens []int32) {
	oh, th := out.(*kernels.Host), table.(*kernels.Host)
	for i, tok := range tokens {
		th.RowF32(oh.F[i*oh.C:i*oh.C+th.C], int(tok))
	}
}

// Gather sets out row i to row rows[i] of x.
func (b *Backend) Gather(out, x kernels.Tensor, rows []int32) {
	oh, xh := out.(*kernels.Host), x.(*kernels.Host)
	for i, r := range rows {
		copy(oh.F[i*oh.C:(i+1)*oh.C], xh.F[int(r)*xh.C:(int(r)+1)*xh.C])
	}
}

// WriteKV stores the batch's keys and values into their cache slots.
func (b *Backend) WriteKV(kCache, vCache, k, v kernels.Tensor, a *kernels.AttnBatch) {
	kc, vc, kh, vh := kCache.(*kernels.Host), vCache.(*kernels.Host), k.(*kernels.Host), v.(*kernels.Host)
	c := kc.C
	if kc.DT == kernels.F16 {
		for i, slot := range a.Slots {
			s := int(slot)
			b.k.f32ToF16(kc.H[s*c:(s+1)*c], kh.F[i*kh.C:i*kh.C+c])
			b.k.f32ToF16(vc.H[s*c:(s+1)*c], vh.F[i*vh.C:i*vh.C+c])
		}
		return
	}
	for i, slot := range a.Slots {
		s := int(slot)
		copy(kc.F[s*c:(s+1)*c], kh.F[i*kh.C:i*kh.C+c])
		copy(vc.F[s*c:(s+1)*c], vh.F[i*vh.C:i*vh.C+c])
	}
}

// Attention computes paged causal attention for every row and head.
func (b *Backend) Attention(out, q, kCache, vCache kernels.Tensor, a *kernels.AttnBatch, s kernels.AttnShape) {
	t := &b.att
	t.k = b.k
	t.out, t.q, t.kc, t.vc, t.a, t.s = out.(*kernels.Host), q.(*kernels.Host), kCache.(*kernels.Host), vCache.(*kernels.Host), a, s
	rows := int(a.QStart[len(a.QStart)-1])
	if cap(t.rowSeq) < rows {
		t.rowSeq = make([]int32, rows)
	}
	t.rowSeq = t.rowSeq[:rows]
	for sq := 0; sq+1 < len(a.QStart); sq++ {
		for i := a.QStart[sq]; i < a.QStart[sq+1]; i++ {
			t.rowSeq[i] = int32(sq)
		}
	}
	b.pool.parallel(rows*s.Heads, 1, 2, t)
	t.out, t.q, t.kc, t.vc, t.a = nil, nil, nil, nil, nil
}

type attnTask struct {
	k              kern
	out, q, kc, vc *kernels.Host
	a              *kernels.AttnBatch
	s              kernels.AttnShape
	rowSeq         []int32
	scores         [][]float32
}

// attnAhead is how many KV blocks ahead attention prefetches.
const attnAhead = 2

func (t *attnTask) run(lo, hi, wk int) {
	s, a := t.s, t.a
	hd := s.HeadDim
	kvDim := t.kc.C
	group := s.Heads / s.KVHeads
	bs := a.BlockSize
	for u := lo; u < hi; u++ {
		i, h := u/s.Heads, u%s.Heads
		sq := int(t.rowSeq[i])
		q1 := int(a.QStart[sq+1])
		ctx := int(a.CtxLen[sq]) - (q1 - i) + 1
		// a sliding-window layer reads only positions [first, ctx); sc[j]
		// is position first+j
		first := s.AttnFirst(ctx - 1)
		n := ctx - first
		sink := float32(math.Inf(-1))
		if s.Sinks != nil {
			sink = s.Sinks[h]
		}
		table := a.Tables[a.TableStart[sq]:a.TableStart[sq+1]]
		if cap(t.scores[wk]) < n+33*hd {
			t.scores[wk] = make([]float32, n+33*hd+256)
		}
		sc := t.scores[wk][:n]
		qh := t.q.F[i*t.q.C+h*hd : i*t.q.C+(h+1)*hd]
		off := (h / group) * hd
		half := t.kc.DT == kernels.F16
		if half {
			// as ggml multiplies an F32 query with an F16 key cache: the
			// query is rounded to float16 first
			q16 := t.scores[wk][n : n+hd]
			for d, v := range qh {
				q16[d] = quant.F16ToF32(quant.F32ToF16(v))
			}
			qh = q16
			if !t.k.simd {
				// ggml's summation order (attn16.go)
				batched := len(t.rowSeq) > 1
				for p := first; p < ctx; p++ {
					at := (int(table[p/bs])*bs+p%bs)*kvDim + off
					sc[p-first] = dotF16Order(qh, t.kc.H[at:at+hd], batched)
				}
				softmaxF16Sink(sc, s.Scale, sink)
				oh := t.out.F[i*t.out.C+h*hd : i*t.out.C+(h+1)*hd]
				part := t.scores[wk][n+hd : n+33*hd]
				wsumF16OrderFrom(sc, t.vc.H, table, bs, kvDim, off, first, oh, part, batched)
				continue
			}
		}
		// Blocks lie anywhere in the cache and a head's keys are kvDim
		// apart, which defeats the hardware prefetcher: each block's rows
		// are prefetched attnAhead blocks before use. Positions are walked
		// in runs that stay inside one block: [p, end).
		pf := func(c *kernels.Host, p int) {
			if p < ctx {
				end := min(ctx, (p/bs+1)*bs)
				at := (int(table[p/bs])*bs+p%bs)*kvDim + off
				if half {
					t.k.prefetchRowsH(c.H, at, kvDim, end-p, hd)
				} else {
					t.k.prefetchRows(c.F, at, kvDim, end-p, hd)
				}
			}
		}
		// next returns the start of the block after the one holding p.
		next := func(p int) int { return (p/bs + 1) * bs }
		for d, p := 0, first; d < attnAhead && p < ctx; d, p = d+1, next(p) {
			pf(t.kc, p)
		}
		for p := first; p < ctx; p = next(p) {
			pf(t.kc, p+attnAhead*bs)
			end := min(ctx, next(p))
			base := (int(table[p/bs])*bs + p%bs) * kvDim
			if half {
				t.k.scoresH(qh, t.kc.H[base+off:], kvDim, sc[p-first:end-first])
			} else {
				t.k.scores(qh, t.kc.F[base+off:], kvDim, sc[p-first:end-first])
			}
		}
		for d, p := 0, first; d < attnAhead && p < ctx; d, p = d+1, next(p) {
			pf(t.vc, p)
		}
		var inv float32
		switch {
		case half:
			softmaxF16Sink(sc, s.Scale, sink)
			inv = 1
		case s.Sinks != nil:
			inv = softmaxSinkUnnorm(t.k, sc, s.Scale, sink)
		default:
			inv = 1 / t.k.softmaxUnnorm(sc, s.Scale)
		}
		oh := t.out.F[i*t.out.C+h*hd : i*t.out.C+(h+1)*hd]
		clear(oh)
		for p := first; p < ctx; p = next(p) {
			pf(t.vc, p+attnAhead*bs)
			end := min(ctx, next(p))
			base := (int(table[p/bs])*bs + p%bs) * kvDim
			if half {
				t.k.wsumH(sc[p-first:end-first], t.vc.H[base+off:], kvDim, oh)
			} else {
				t.k.wsum(sc[p-first:end-first], t.vc.F[base+off:], kvDim, oh)
			}
		}
		if !half {
			for d := range oh {
				oh[d] *= inv
			}
		}
	}
}

// softmaxSinkUnnorm is softmaxUnnorm with a sink logit in the softmax: it
// sets x[i] = exp(x[i]*scale - m) for m = max(max x·scale, sink) and
// returns 1 / (exp(sink - m) + Σ x), the factor that normalises them.
func softmaxSinkUnnorm(k kern, x []float32, scale, sink float32) float32 {
	if len(x) == 0 {
		return 0
	}
	// softmaxUnnorm subtracts the scores' own maximum ms: rescale its
	// exponentials by exp(ms - m) after the fact, and add the sink's share.
	ms := float32(math.Inf(-1))
	for _, v := range x {
		ms = max(ms, v*scale)
	}
	mx := max(ms, sink)
	sum := float64(k.softmaxUnnorm(x, scale))
	shift := math.Exp(float64(ms - mx))
	total := sum*shift + math.Exp(float64(sink-mx))
	return float32(shift / total)
}

// softmaxF16 is softmaxF16Sink without a sink.
func softmaxF16(x []float32, scale float32) { softmaxF16Sink(x, scale, float32(math.Inf(-1))) }

// softmaxF16Sink sets x = softmax(x·scale) with the probabilities rounded
// to float16, as ggml computes attention over an F16 cache: scale,
// subtract the maximum, exponentiate, sum (see below), multiply by the
// float32 reciprocal of the sum, and round each probability to float16
// where it meets the F16 values. A finite sink logit joins the maximum and
// the sum without a probability of its own (gpt-oss); -Inf is none.
func softmaxF16Sink(x []float32, scale, sink float32) {
	mx := sink
	for i := range x {
		x[i] *= scale
		mx = max(mx, x[i])
	}
	// exponentials summed as ggml's AVX2 softmax: in float32 per group of
	// 8 (positions 8g..8g+7, missing ones 0), the groups in float64
	var sum float64
	if !math.IsInf(float64(sink), -1) {
		sum = math.Exp(float64(sink - mx))
	}
	var g [8]float32
	for i, v := range x {
		e := float32(math.Exp(float64(v - mx)))
		x[i] = e
		g[i%8] = e
		if i%8 == 7 || i == len(x)-1 {
			sum += float64(hsum8(&g))
			g = [8]float32{}
		}
	}
	inv := float32(1 / sum)
	for i, v := range x {
		x[i] = quant.F16ToF32(quant.F32ToF16(v * inv))
	}
}

// expf is a float32 exp accurate to about 2 ulp (Cephes-style range
// reduction and a degree-6 polynomial), several times faster than math.Exp.
func expf(x float32) float32 {
	const (
		ln2Hi = 0.693359375
		ln2Lo = -2.12194440e-4
		log2e = 1.44269504088896341
	)
	if x > 88.3762626647949 {
		return float32(math.Inf(1))
	}
	if x < -103.9 {
		return 0
	}
	n := float32(math.Floor(float64(x*log2e + 0.5)))
	r := x - n*ln2Hi - n*ln2Lo
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	p = p*r*r + r + 1
	e := int32(n)
	if e < -126 {
		return p * math.Float32frombits(uint32(e+126+127)<<23) * math.Float32frombits(1<<23)
	}
	return p * math.Float32frombits(uint32(e+127)<<23)
}
