package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// BenchmarkAttentionDecode1B times one decode step's attention at the 1B
// shape (16 layers, 32 query heads on 8 KV heads of 64 values, F16 cache)
// for seqs sequences of ctx positions each in scattered 16-position
// blocks, where four query heads read the same key and value rows: one
// sequence of 192 (the batch-1 step's share), 16 of 256 (the 16-sequence
// step) and one of 1024 and 4096 (long contexts).
func BenchmarkAttentionDecode1B(b *testing.B) {
	for _, c := range []struct{ seqs, ctx int }{{1, 192}, {16, 256}, {1, 1024}, {1, 4096}} {
		b.Run(fmt.Sprintf("seqs=%d/ctx=%d", c.seqs, c.ctx), func(b *testing.B) { benchAttention1B(b, c.seqs, c.ctx) })
	}
}

func benchAttention1B(b *testing.B, seqs, ctx int) {
	const heads, kvHeads, hd, bs, layers = 32, 8, 64, 16, 16
	r := rand.New(rand.NewPCG(5, 6))
	be := New(Options{KVF16: true})
	defer be.Close()
	nb := ctx / bs
	// the cache laid out per KV head, as the model lays it out
	a := &kernels.AttnBatch{QStart: []int32{0}, TableStart: []int32{0}, BlockSize: bs, KVHeadDim: hd}
	perm := r.Perm(2 * seqs * nb)
	for s := 0; s < seqs; s++ {
		for _, p := range perm[s*nb : (s+1)*nb] {
			a.Tables = append(a.Tables, int32(p))
		}
		a.TableStart = append(a.TableStart, int32(len(a.Tables)))
		a.QStart = append(a.QStart, int32(s+1))
		a.CtxLen = append(a.CtxLen, int32(ctx))
	}
	slots := 2 * seqs * nb * bs
	type layer struct{ kc, vc kernels.Tensor }
	var ls []layer
	for l := 0; l < layers; l++ {
		kc, vc := be.AllocKV(slots, kvHeads*hd), be.AllocKV(slots, kvHeads*hd)
		for _, c := range []kernels.Tensor{kc, vc} {
			for i, x := range randF(r, slots*kvHeads*hd) {
				c.(*kernels.Host).H[i] = quant.F32ToF16(x)
			}
		}
		ls = append(ls, layer{kc, vc})
	}
	q, o := be.Alloc(seqs, heads*hd), be.Alloc(seqs, heads*hd)
	copy(be.ToHost(q, seqs), randF(r, seqs*heads*hd))
	sh := kernels.AttnShape{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 0.125}
	b.ResetTimer()
	c0 := processCPU()
	for i := 0; i < b.N; i++ {
		for _, l := range ls {
			be.Attention(o, q, l.kc, l.vc, a, sh)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/step")
	b.ReportMetric(float64((processCPU()-c0).Microseconds())/float64(b.N), "cpu-µs/step")
}

// gqaCase is one grouped-attention test: kv KV heads of group query heads
// each, head size hd, blocks of bs positions, a sliding window (0: none),
// sink logits, an F16 cache.
type gqaCase struct {
	kv, group, hd, bs, window int
	sinks, half               bool
}

// gqaBatch is a random varlen batch for a gqaCase: sequences with a
// cached prefix of up to maxPrefix positions and a chunk of 1–12 new rows,
// block tables scattered over the cache, the cache filled at every slot.
type gqaBatch struct {
	a        *kernels.AttnBatch
	sh       kernels.AttnShape
	n, slots int
	q        []float32 // n rows × heads·hd
	kc, vc   []float32 // slots × kv·hd (float16 values when half)
	rowPos   []int     // each row's position
}

func newGQABatch(r *rand.Rand, c gqaCase, nseq, maxPrefix int) *gqaBatch {
	heads := c.kv * c.group
	g := &gqaBatch{a: &kernels.AttnBatch{QStart: []int32{0}, TableStart: []int32{0}, BlockSize: c.bs}}
	a := g.a
	var lens []int
	nblocks := 0
	for s := 0; s < nseq; s++ {
		prefix, rows := r.IntN(maxPrefix+1), r.IntN(12)+1
		ctx := prefix + rows
		lens = append(lens, ctx)
		nblocks += (ctx + c.bs - 1) / c.bs
		a.QStart = append(a.QStart, a.QStart[s]+int32(rows))
		a.CtxLen = append(a.CtxLen, int32(ctx))
		for p := prefix; p < ctx; p++ {
			g.rowPos = append(g.rowPos, p)
		}
	}
	perm := r.Perm(nblocks + 3)
	k := 0
	for _, ctx := range lens {
		for i := 0; i < (ctx+c.bs-1)/c.bs; i++ {
			a.Tables = append(a.Tables, int32(perm[k]))
			k++
		}
		a.TableStart = append(a.TableStart, int32(len(a.Tables)))
	}
	g.n, g.slots = int(a.QStart[nseq]), (nblocks+3)*c.bs
	g.q = randF(r, g.n*heads*c.hd)
	g.kc, g.vc = randF(r, g.slots*c.kv*c.hd), randF(r, g.slots*c.kv*c.hd)
	if c.half {
		for _, xs := range [][]float32{g.q, g.kc, g.vc} {
			for i, x := range xs {
				xs[i] = quant.F16ToF32(quant.F32ToF16(x))
			}
		}
	}
	g.sh = kernels.AttnShape{Heads: heads, KVHeads: c.kv, HeadDim: c.hd, Scale: 0.3, Window: c.window}
	if c.sinks {
		g.sh.Sinks = randF(r, heads)
		for i := range g.sh.Sinks {
			g.sh.Sinks[i] *= 4
		}
	}
	return g
}

// reference returns the batch's attention output in float64: per row and
// head, softmax(scale·q·k) over the window's positions (with the head's
// sink logit in the denominator) times the values.
func (g *gqaBatch) reference() []float64 {
	sh, a := g.sh, g.a
	hd, kvDim, group := sh.HeadDim, sh.KVHeads*sh.HeadDim, sh.Heads/sh.KVHeads
	out := make([]float64, g.n*sh.Heads*hd)
	for sq := 0; sq+1 < len(a.QStart); sq++ {
		table := a.Tables[a.TableStart[sq]:a.TableStart[sq+1]]
		for i := int(a.QStart[sq]); i < int(a.QStart[sq+1]); i++ {
			pos := g.rowPos[i]
			first := sh.AttnFirst(pos)
			for h := 0; h < sh.Heads; h++ {
				q := g.q[(i*sh.Heads+h)*hd:][:hd]
				off := (h / group) * hd
				slot := func(p int) int { return (int(table[p/a.BlockSize])*a.BlockSize + p%a.BlockSize) * kvDim }
				sc := make([]float64, pos+1-first)
				mx := math.Inf(-1)
				if sh.Sinks != nil {
					mx = float64(sh.Sinks[h])
				}
				for p := first; p <= pos; p++ {
					var d float64
					for j, x := range q {
						d += float64(x) * float64(g.kc[slot(p)+off+j])
					}
					sc[p-first] = d * float64(sh.Scale)
					mx = math.Max(mx, sc[p-first])
				}
				var sum float64
				if sh.Sinks != nil {
					sum = math.Exp(float64(sh.Sinks[h]) - mx)
				}
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				o := out[(i*sh.Heads+h)*hd:][:hd]
				for p := first; p <= pos; p++ {
					w := sc[p-first] / sum
					for j := range o {
						o[j] += w * float64(g.vc[slot(p)+off+j])
					}
				}
			}
		}
	}
	return out
}

// run returns the CPU backend's attention output for the batch, the
// cache laid out per KV head (AttnBatch.KVHeadDim = HeadDim, kvAt) when
// heads, else slot by slot.
func (g *gqaBatch) run(t testing.TB, be *Backend, half, heads bool) []float32 {
	kvDim := g.sh.KVHeads * g.sh.HeadDim
	w := kvDim
	if heads {
		w = g.sh.HeadDim
		g.a.KVHeadDim = w
		defer func() { g.a.KVHeadDim = 0 }()
	}
	mk := func(src []float32) kernels.Tensor {
		tt := be.AllocKV(g.slots, kvDim).(*kernels.Host)
		if half != (tt.DT == kernels.F16) {
			t.Fatalf("AllocKV gave %v (half %v)", tt.DT, half)
		}
		for i, x := range src {
			at := kvAt(i/kvDim, g.a.BlockSize, kvDim, w, i%kvDim)
			if half {
				tt.H[at] = quant.F32ToF16(x)
			} else {
				tt.F[at] = x
			}
		}
		return tt
	}
	kc, vc := mk(g.kc), mk(g.vc)
	q, o := be.Alloc(g.n, g.sh.Heads*g.sh.HeadDim), be.Alloc(g.n, g.sh.Heads*g.sh.HeadDim)
	copy(be.ToHost(q, g.n), g.q)
	be.Attention(o, q, kc, vc, g.a, g.sh)
	return be.ToHost(o, g.n)
}

// TestAttentionGQA checks attention on the grouped kernels (and the plain
// per-head path) against a float64 reference: GQA ratios 1–8 (the
// grouped kernels serve heads 4 and 2 at a time, a lone head through the
// per-head kernels), head sizes 16–128, contexts crossing many
// blocks, sliding windows shorter and longer than a block, sink logits,
// F32 and F16 caches. The F16 cache rounds each probability to float16
// (as ggml does), which moves an output by at most 2⁻¹¹ of Σ p·|v|: the
// tolerance is 1e-3 there, 1e-4 for F32.
func TestAttentionGQA(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	var cases []gqaCase
	for _, group := range []int{1, 2, 3, 4, 6, 7, 8} {
		for _, hd := range []int{16, 32, 48, 64, 128} {
			for _, half := range []bool{false, true} {
				cases = append(cases, gqaCase{kv: 2, group: group, hd: hd, bs: 16, half: half})
			}
		}
	}
	for _, c := range []gqaCase{
		{kv: 8, group: 4, hd: 64, bs: 16, window: 5, sinks: true, half: true},
		{kv: 8, group: 4, hd: 64, bs: 16, window: 40, sinks: true},
		{kv: 1, group: 8, hd: 64, bs: 4, window: 128, sinks: true, half: true},
		{kv: 2, group: 8, hd: 64, bs: 8, window: 1, sinks: true},
		{kv: 3, group: 2, hd: 128, bs: 32, window: 20},
		{kv: 1, group: 4, hd: 64, bs: 1, sinks: true, half: true},
	} {
		cases = append(cases, c)
	}
	for _, c := range cases {
		g := newGQABatch(r, c, 3, 300)
		want := g.reference()
		for _, plain := range []bool{false, true} {
			for _, heads := range []bool{false, true} {
				be := New(Options{Threads: 2, Plain: plain, KVF16: c.half})
				got := g.run(t, be, c.half, heads)
				be.Close()
				tol := 1e-4
				if c.half {
					tol = 1e-3
				}
				for i, w := range want {
					if d := math.Abs(float64(got[i]) - w); d > tol*(1+math.Abs(w)) {
						t.Fatalf("%+v plain=%v heads=%v: [%d] got %v want %v", c, plain, heads, i, got[i], w)
					}
				}
			}
		}
	}
}

// TestGroupKernels checks the grouped score and value-sum kernels against
// the per-head kernels they replace: value sums bit-equal (the same
// position order per column) where the per-head sum is the assembly one
// (head sizes a multiple of 32; else within 1e-5), scores bit-equal to scores4's on every
// 4-key run and within 1e-5 of a float64 dot on the rest, for 1, 2 and 4
// heads, head sizes 16–128 and 1–19 keys.
func TestGroupKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	k := kern{avx2: hasAVX2}
	if !k.avx2 {
		t.Skip("no AVX2: the grouped kernels do not run here")
	}
	for _, g := range []int{1, 2, 4} {
		for _, hd := range []int{16, 32, 48, 64, 96, 128} {
			for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 9, 16, 19} {
				stride := 3*hd + 8
				q := randF(r, g*hd)
				qg := make([]float32, g*hd)
				interleave8(qg, q, g, hd)
				kc := randF(r, (n-1)*stride+hd)
				kh := f16s(kc)
				os := n + 3
				w := randF(r, g*os)
				for _, half := range []bool{false, true} {
					var kf []float32
					var kk []uint16
					val := func(i int) float32 { return kc[i] }
					if half {
						kk = kh
						val = func(i int) float32 { return quant.F16ToF32(kh[i]) }
					} else {
						kf = kc
					}
					got := make([]float32, g*os)
					k.scoresGroup(qg, g, kf, kk, stride, n, hd, got, os)
					gotW := make([]float32, g*hd)
					k.wsumGroup(w, os, g, kf, kk, stride, n, hd, gotW)
					for h := 0; h < g; h++ {
						one := make([]float32, n)
						wantW := make([]float32, hd)
						if half {
							k.scoresH(q[h*hd:(h+1)*hd], kh, stride, one)
							k.wsumH(w[h*os:h*os+n], kh, stride, wantW)
						} else {
							k.scores(q[h*hd:(h+1)*hd], kc, stride, one)
							k.wsum(w[h*os:h*os+n], kc, stride, wantW)
						}
						for p := 0; p < n; p++ {
							s := got[h*os+p]
							if p < n&^3 && s != one[p] {
								t.Fatalf("g=%d hd=%d n=%d half=%v: head %d score %d = %v, per-head kernel %v", g, hd, n, half, h, p, s, one[p])
							}
							var d float64
							for j := 0; j < hd; j++ {
								d += float64(q[h*hd+j]) * float64(val(p*stride+j))
							}
							if math.Abs(float64(s)-d) > 1e-5*(1+math.Abs(d))*math.Sqrt(float64(hd)) {
								t.Fatalf("g=%d hd=%d n=%d half=%v: head %d score %d = %v, want %v", g, hd, n, half, h, p, s, d)
							}
						}
						for j, x := range wantW {
							// bit-equal where the per-head sum is assembly (FMA)
							if y := gotW[h*hd+j]; hd%32 == 0 && y != x || !close32(y, x, 1e-5) {
								t.Fatalf("g=%d hd=%d n=%d half=%v: head %d sum %d = %v, per-head kernel %v", g, hd, n, half, h, j, gotW[h*hd+j], x)
							}
						}
					}
				}
			}
		}
	}
}

// TestAttentionGQAAllocs checks that a grouped attention step allocates
// nothing once its scratch has grown.
func TestAttentionGQAAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 36))
	for _, half := range []bool{false, true} {
		c := gqaCase{kv: 8, group: 4, hd: 64, bs: 16, window: 50, sinks: true, half: half}
		g := newGQABatch(r, c, 4, 200)
		be := New(Options{Threads: 2, KVF16: half})
		g.run(t, be, half, true)
		g.a.KVHeadDim = c.hd
		kvDim := c.kv * c.hd
		kc, vc := be.AllocKV(g.slots, kvDim), be.AllocKV(g.slots, kvDim)
		q, o := be.Alloc(g.n, g.sh.Heads*c.hd), be.Alloc(g.n, g.sh.Heads*c.hd)
		be.Attention(o, q, kc, vc, g.a, g.sh)
		if n := testing.AllocsPerRun(20, func() { be.Attention(o, q, kc, vc, g.a, g.sh) }); n != 0 {
			t.Errorf("half=%v: %v allocations per step, want 0", half, n)
		}
		be.Close()
	}
}

// TestGroupKernelsAVX512 checks the AVX-512 grouped kernels bit for bit
// against the AVX2 ones they replace (the sums accumulate positions in
// the same order per column): groups of 2 and 4, head sizes that take
// them (multiples of 64) and that do not, 1–97 rows, onto a nonzero out.
func TestGroupKernelsAVX512(t *testing.T) {
	if !hasAVX512 || !hasAVX2 {
		t.Skip("no AVX-512: the AVX-512 grouped kernels do not run here")
	}
	r := rand.New(rand.NewPCG(35, 36))
	k2, kz := kern{avx2: true}, kern{avx2: true, simd: true}
	for _, g := range []int{2, 4} {
		for _, hd := range []int{32, 64, 96, 128, 192, 256} {
			for _, n := range []int{1, 2, 3, 5, 8, 16, 17, 31, 64, 97} {
				stride := 2*hd + 16
				vc := randF(r, (n-1)*stride+hd)
				vh := f16s(vc)
				ws := n + 5
				w := randF(r, g*ws)
				out0 := randF(r, g*hd)
				for _, half := range []bool{false, true} {
					var vf []float32
					var vv []uint16
					if half {
						vv = vh
					} else {
						vf = vc
					}
					want := append([]float32(nil), out0...)
					got := append([]float32(nil), out0...)
					k2.wsumGroup(w, ws, g, vf, vv, stride, n, hd, want)
					kz.wsumGroup(w, ws, g, vf, vv, stride, n, hd, got)
					for j := range want {
						if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
							t.Fatalf("g=%d hd=%d n=%d half=%v: sum %d = %v, AVX2 kernel %v", g, hd, n, half, j, got[j], want[j])
						}
					}
				}
			}
		}
	}
}

// TestWriteKVLayout checks where WriteKV puts each key and value: slot by
// slot with AttnBatch.KVHeadDim 0, per block and KV head (kvAt) with the
// head size, for F32 and F16 caches and blocks of 1–16 slots, and that it
// allocates nothing.
func TestWriteKVLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(37, 38))
	const kvHeads, hd, slots, rows = 3, 32, 64, 7
	kvDim := kvHeads * hd
	for _, half := range []bool{false, true} {
		for _, bs := range []int{1, 4, 16} {
			for _, khd := range []int{0, hd} {
				be := New(Options{Threads: 2, KVF16: half})
				kc, vc := be.AllocKV(slots, kvDim).(*kernels.Host), be.AllocKV(slots, kvDim).(*kernels.Host)
				k, v := be.Alloc(rows, kvDim), be.Alloc(rows, kvDim)
				copy(be.ToHost(k, rows), randF(r, rows*kvDim))
				copy(be.ToHost(v, rows), randF(r, rows*kvDim))
				a := &kernels.AttnBatch{BlockSize: bs, KVHeadDim: khd}
				for _, s := range r.Perm(slots)[:rows] {
					a.Slots = append(a.Slots, int32(s))
				}
				be.WriteKV(kc, vc, k, v, a)
				w := kvDim
				if khd > 0 {
					w = khd
				}
				for i, s := range a.Slots {
					for c := 0; c < kvDim; c++ {
						at := kvAt(int(s), bs, kvDim, w, c)
						if khd == 0 && at != int(s)*kvDim+c {
							t.Fatalf("kvAt(%d, %d, %d, %d, %d) = %d, want the slot-major %d", s, bs, kvDim, w, c, at, int(s)*kvDim+c)
						}
						for _, p := range []struct {
							c   *kernels.Host
							src []float32
						}{{kc, be.ToHost(k, rows)}, {vc, be.ToHost(v, rows)}} {
							want, got := p.src[i*kvDim+c], float32(0)
							if half {
								want, got = quant.F16ToF32(quant.F32ToF16(want)), quant.F16ToF32(p.c.H[at])
							} else {
								got = p.c.F[at]
							}
							if got != want {
								t.Fatalf("half=%v bs=%d KVHeadDim=%d: row %d col %d at %d = %v, want %v", half, bs, khd, i, c, at, got, want)
							}
						}
					}
				}
				if n := testing.AllocsPerRun(10, func() { be.WriteKV(kc, vc, k, v, a) }); n != 0 {
					t.Errorf("WriteKV: %v allocations, want 0", n)
				}
				be.Close()
			}
		}
	}
}

// f16s returns x rounded to float16, element by element.
func f16s(x []float32) []uint16 {
	h := make([]uint16, len(x))
	for i, v := range x {
		h[i] = quant.F32ToF16(v)
	}
	return h
}
