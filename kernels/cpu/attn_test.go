package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// checkAttention builds a random varlen batch (sequences with a cached
// prefix and a chunk of new rows, scattered block tables) and compares the
// CPU backend's WriteKV+Attention with the reference backend's.
func checkAttention(t *testing.T, r *rand.Rand, nseq, kvHeads, group, hd, bs int) {
	t.Helper()
	checkAttentionKV(t, r, nseq, kvHeads, group, hd, bs, false)
}

// checkAttentionKV is checkAttention with, when half, the CPU backend's
// F16 KV cache: queries, keys and values are drawn already rounded to
// float16, so the reference (F32 cache) sees the same numbers; the CPU
// backend also rounds each probability to float16 (as ggml does), which
// moves an output by at most 2⁻¹¹ of Σ p·|v|, so the tolerance is 1e-3
// there (1e-4 otherwise).
func checkAttentionKV(t *testing.T, r *rand.Rand, nseq, kvHeads, group, hd, bs int, half bool) {
	t.Helper()
	checkAttentionWindow(t, r, nseq, kvHeads, group, hd, bs, half, 0, false)
}

// checkAttentionWindow is checkAttentionKV for a sliding-window layer
// (window > 0) and, with sinks, a random sink logit per head.
func checkAttentionWindow(t *testing.T, r *rand.Rand, nseq, kvHeads, group, hd, bs int, half bool, window int, sinks bool) {
	t.Helper()
	heads := kvHeads * group
	a := &kernels.AttnBatch{QStart: []int32{0}, TableStart: []int32{0}, BlockSize: bs}
	nblocks := 0
	var tables [][]int32
	for s := 0; s < nseq; s++ {
		prefix, rows := r.IntN(40), r.IntN(12)+1
		ctx := prefix + rows
		nb := (ctx + bs - 1) / bs
		tables = append(tables, make([]int32, nb))
		nblocks += nb
		a.QStart = append(a.QStart, a.QStart[s]+int32(rows))
		a.CtxLen = append(a.CtxLen, int32(ctx))
	}
	perm := r.Perm(nblocks + 3)
	k := 0
	for s, tb := range tables {
		for i := range tb {
			tb[i] = int32(perm[k])
			k++
		}
		a.Tables = append(a.Tables, tb...)
		a.TableStart = append(a.TableStart, int32(len(a.Tables)))
		rows := int(a.QStart[s+1] - a.QStart[s])
		for p := int(a.CtxLen[s]) - rows; p < int(a.CtxLen[s]); p++ {
			a.Slots = append(a.Slots, tb[p/bs]*int32(bs)+int32(p%bs))
		}
	}
	n := int(a.QStart[nseq])
	slots := (nblocks + 3) * bs
	q0, k0, v0 := randF(r, n*heads*hd), randF(r, n*kvHeads*hd), randF(r, n*kvHeads*hd)
	kc0, vc0 := randF(r, slots*kvHeads*hd), randF(r, slots*kvHeads*hd)
	if half {
		for _, xs := range [][]float32{q0, k0, v0, kc0, vc0} {
			for i, x := range xs {
				xs[i] = quant.F16ToF32(quant.F32ToF16(x))
			}
		}
	}
	sh := kernels.AttnShape{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 0.3, Window: window}
	if sinks {
		sh.Sinks = randF(r, heads)
		for i := range sh.Sinks {
			sh.Sinks[i] *= 4
		}
	}
	run := func(be kernels.Backend) []float32 {
		mk := func(rows, cols int, src []float32) kernels.Tensor {
			tt := be.Alloc(rows, cols)
			copy(be.ToHost(tt, rows), src)
			return tt
		}
		q, kk, v := mk(n, heads*hd, q0), mk(n, kvHeads*hd, k0), mk(n, kvHeads*hd, v0)
		kc, vc := mk(slots, kvHeads*hd, kc0), mk(slots, kvHeads*hd, vc0)
		if cb, ok := be.(*Backend); ok && half {
			mkH := func(src []float32) kernels.Tensor {
				tt := cb.AllocKV(slots, kvHeads*hd).(*kernels.Host)
				if tt.DT != kernels.F16 {
					t.Fatalf("AllocKV gave %v, want F16", tt.DT)
				}
				for i, x := range src {
					tt.H[i] = quant.F32ToF16(x)
				}
				return tt
			}
			kc, vc = mkH(kc0), mkH(vc0)
		}
		o := be.Alloc(n, heads*hd)
		be.WriteKV(kc, vc, kk, v, a)
		be.Attention(o, q, kc, vc, a, sh)
		return be.ToHost(o, n)
	}
	want := run(kernels.NewRef())
	for _, plain := range []bool{false, true} {
		b := New(Options{Threads: 2, Plain: plain, KVF16: half})
		got := run(b)
		b.Close()
		tol := float32(1e-4)
		if half {
			tol = 1e-3
		}
		for i := range want {
			if !close32(got[i], want[i], tol) {
				t.Fatalf("nseq=%d kv=%d group=%d hd=%d bs=%d plain=%v window=%d sinks=%v: [%d] got %v want %v", nseq, kvHeads, group, hd, bs, plain, window, sinks, i, got[i], want[i])
			}
		}
	}
}

func TestAttentionShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, c := range [][5]int{{1, 1, 1, 16, 16}, {3, 2, 3, 16, 4}, {5, 4, 1, 48, 16}, {2, 1, 8, 64, 8}, {4, 2, 2, 12, 3}, {2, 2, 1, 128, 16}} {
		for _, half := range []bool{false, true} {
			checkAttentionKV(t, r, c[0], c[1], c[2], c[3], c[4], half)
		}
	}
}

// TestAttentionWindowSinks checks sliding-window attention with and
// without sink logits (gpt-oss) against the reference backend, with
// windows shorter and longer than a block and than the context.
func TestAttentionWindowSinks(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, c := range [][7]int{{3, 2, 3, 16, 4, 5, 1}, {2, 1, 8, 64, 8, 3, 1}, {4, 2, 2, 12, 3, 100, 1}, {2, 2, 1, 32, 16, 0, 1}, {3, 1, 2, 16, 4, 7, 0}, {1, 1, 1, 16, 16, 1, 1}} {
		for _, half := range []bool{false, true} {
			checkAttentionWindow(t, r, c[0], c[1], c[2], c[3], c[4], half, c[5], c[6] == 1)
		}
	}
}

// TestF32ToF16 checks the vector conversion against quant.F32ToF16 on
// every tail length and on values that round, overflow and underflow.
func TestF32ToF16(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	special := []float32{0, 1, -1, 65504, 70000, -70000, 6e-8, 3e-8, 1e-10, 0.1, 2049, 2051}
	for n := 0; n <= 40; n++ {
		src := randF(r, n)
		for i := range src {
			src[i] *= 100
			if r.IntN(3) == 0 {
				src[i] = special[r.IntN(len(special))]
			}
		}
		for name, k := range kerns() {
			got := make([]uint16, n)
			k.f32ToF16(got, src)
			for i, x := range src {
				if want := quant.F32ToF16(x); got[i] != want {
					t.Fatalf("%s n=%d f16(%v) = %#04x, want %#04x", name, n, x, got[i], want)
				}
			}
		}
	}
}

// FuzzAttention checks paged attention against the reference over random
// batches and geometries.
func FuzzAttention(f *testing.F) {
	f.Add(uint64(1), uint8(3), uint8(2), uint8(2), uint8(1), uint8(4))
	f.Fuzz(func(t *testing.T, seed uint64, nseq, kvHeads, group, hd16, bs uint8) {
		r := rand.New(rand.NewPCG(seed, 3))
		hd := (int(hd16%8) + 1) * 16
		if seed%3 == 0 {
			hd = 2 * (int(hd16%20) + 1) // also odd multiples for the Go path
		}
		window := 0
		if seed%5 >= 3 {
			window = int(seed/5%40) + 1
		}
		checkAttentionWindow(t, r, int(nseq%6)+1, int(kvHeads%4)+1, int(group%4)+1, hd, int(bs%17)+1, seed%2 == 1, window, seed%7 < 3)
	})
}

// BenchmarkAttentionDecode runs, per iteration, the decode attention of
// the 110M shape (12 layers, 12 heads of 64) for 16 sequences of 200
// cached positions, each layer with its own cache and block tables
// scattered over it, so that keys and values stream from memory as in a
// real step (236 MB of K and V; half of it with an F16 cache).
func BenchmarkAttentionDecode(b *testing.B) {
	for _, half := range []bool{false, true} {
		name := "kv=f32"
		if half {
			name = "kv=f16"
		}
		b.Run(name, func(b *testing.B) { benchAttentionDecode(b, half) })
	}
}

func benchAttentionDecode(b *testing.B, half bool) {
	const nseq, ctx, heads, hd, bs, layers = 16, 200, 12, 64, 16, 12
	r := rand.New(rand.NewPCG(5, 5))
	be := New(Options{KVF16: half})
	defer be.Close()
	a := &kernels.AttnBatch{QStart: []int32{0}, TableStart: []int32{0}, BlockSize: bs}
	nb := (ctx + bs - 1) / bs
	perm := r.Perm(nseq * nb)
	for s := 0; s < nseq; s++ {
		for i := 0; i < nb; i++ {
			a.Tables = append(a.Tables, int32(perm[s*nb+i]))
		}
		a.TableStart = append(a.TableStart, int32(len(a.Tables)))
		a.QStart = append(a.QStart, int32(s+1))
		a.CtxLen = append(a.CtxLen, ctx)
	}
	slots := nseq * nb * bs
	type layer struct{ kc, vc kernels.Tensor }
	var ls []layer
	for l := 0; l < layers; l++ {
		kc, vc := be.AllocKV(slots, heads*hd), be.AllocKV(slots, heads*hd)
		for _, c := range []kernels.Tensor{kc, vc} {
			h, src := c.(*kernels.Host), randF(r, slots*heads*hd)
			if half {
				for i, x := range src {
					h.H[i] = quant.F32ToF16(x)
				}
			} else {
				copy(h.F, src)
			}
		}
		ls = append(ls, layer{kc, vc})
	}
	q, o := be.Alloc(nseq, heads*hd), be.Alloc(nseq, heads*hd)
	copy(be.ToHost(q, nseq), randF(r, nseq*heads*hd))
	sh := kernels.AttnShape{Heads: heads, KVHeads: heads, HeadDim: hd, Scale: 0.125}
	b.ResetTimer()
	c0 := processCPU()
	for i := 0; i < b.N; i++ {
		for _, l := range ls {
			be.Attention(o, q, l.kc, l.vc, a, sh)
		}
	}
	eb := 4
	if half {
		eb = 2
	}
	b.ReportMetric(float64(b.N)*2*layers*nseq*ctx*heads*hd*float64(eb)/b.Elapsed().Seconds()/1e9, "GB/s")
	b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/step")
	b.ReportMetric((processCPU()-c0).Seconds()*1e3/float64(b.N), "cpu-ms/step")
}

// TestAttentionWindowReadsOnlyWindow fills every cache position outside
// the last query's window with NaN: a sliding-window layer's attention
// (with sinks, F32 and F16 caches) must never read them.
func TestAttentionWindowReadsOnlyWindow(t *testing.T) {
	const heads, hd, bs, ctx, window = 2, 16, 4, 23, 6
	nan := float32(math.NaN())
	for _, half := range []bool{false, true} {
		for name, be := range map[string]kernels.Backend{"ref": kernels.NewRef(), "cpu": New(Options{Threads: 2, KVF16: half})} {
			if name == "ref" && half {
				continue
			}
			nb := (ctx + bs - 1) / bs
			table := make([]int32, nb)
			for i := range table {
				table[i] = int32(nb - 1 - i)
			}
			kc, vc := kernels.AllocKV(be, nb*bs, heads*hd), kernels.AllocKV(be, nb*bs, heads*hd)
			r := rand.New(rand.NewPCG(1, 1))
			k, v := be.Alloc(ctx, heads*hd), be.Alloc(ctx, heads*hd)
			kf, vf := be.ToHost(k, ctx), be.ToHost(v, ctx)
			for p := 0; p < ctx; p++ {
				for j := 0; j < heads*hd; j++ {
					kf[p*heads*hd+j], vf[p*heads*hd+j] = float32(r.NormFloat64()), float32(r.NormFloat64())
					if p <= ctx-1-window { // outside the last row's window
						kf[p*heads*hd+j], vf[p*heads*hd+j] = nan, nan
					}
				}
			}
			a := &kernels.AttnBatch{QStart: []int32{0, ctx}, CtxLen: []int32{ctx}, Tables: table, TableStart: []int32{0, int32(nb)}, BlockSize: bs}
			for p := 0; p < ctx; p++ {
				a.Slots = append(a.Slots, table[p/bs]*bs+int32(p%bs))
			}
			be.WriteKV(kc, vc, k, v, a)
			// attend with the last row only
			last := &kernels.AttnBatch{QStart: []int32{0, 1}, CtxLen: []int32{ctx}, Tables: table, TableStart: []int32{0, int32(nb)}, BlockSize: bs}
			q, out := be.Alloc(1, heads*hd), be.Alloc(1, heads*hd)
			for i := range be.ToHost(q, 1) {
				be.ToHost(q, 1)[i] = float32(r.NormFloat64())
			}
			be.Attention(out, q, kc, vc, last, kernels.AttnShape{Heads: heads, KVHeads: heads, HeadDim: hd, Scale: 0.25, Window: window, Sinks: []float32{0.5, -1}})
			for i, x := range be.ToHost(out, 1) {
				if math.IsNaN(float64(x)) {
					t.Fatalf("%s half=%v: out[%d] is NaN: a position outside the window was read", name, half, i)
				}
			}
			be.Close()
		}
	}
}

// TestSoftmaxF16 checks the F16-cache softmax: every probability is a
// float16 value within one float16 step of the exact softmax, and
// they sum to 1 within the float16 roundings.
func TestSoftmaxF16(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 17))
	for _, n := range []int{1, 2, 7, 32, 100} {
		x := randF(r, n)
		for i := range x {
			x[i] *= 20
		}
		const scale = 0.125
		mx := math.Inf(-1)
		for _, v := range x {
			mx = math.Max(mx, float64(v)*scale)
		}
		exact := make([]float64, n)
		var sum float64
		for i, v := range x {
			exact[i] = math.Exp(float64(v)*scale - mx)
			sum += exact[i]
		}
		variants := map[string]func([]float32){"ggml-order": func(p []float32) { softmaxF16Sink(p, scale, float32(math.Inf(-1))) }}
		for kn, k := range kerns() {
			variants["vec-"+kn] = func(p []float32) { softmaxF16Vec(k, p, scale, float32(math.Inf(-1))) }
		}
		for name, run := range variants {
			p := append([]float32(nil), x...)
			run(p)
			var total float64
			for i, v := range p {
				if quant.F16ToF32(quant.F32ToF16(v)) != v {
					t.Fatalf("%s n=%d p[%d] = %v is not a float16 value", name, n, i, v)
				}
				want := exact[i] / sum
				if d := math.Abs(float64(v) - want); d > math.Max(want*(1.0/1024), 6e-8) {
					t.Fatalf("%s n=%d p[%d] = %v, exact %v", name, n, i, v, want)
				}
				total += float64(v)
			}
			if math.Abs(total-1) > float64(n)/2048 {
				t.Fatalf("%s n=%d: probabilities sum to %v", name, n, total)
			}
		}
	}
}

// TestAttentionF16RoundsQuery checks that with an F16 cache the query is
// rounded to float16 before its products with the keys (as ggml does): a
// query and its float16 rounding give the same output bit for bit, while
// with an F32 cache they do not.
func TestAttentionF16RoundsQuery(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 4))
	const heads, hd, ctx = 2, 16, 5
	a := &kernels.AttnBatch{QStart: []int32{0, 1}, CtxLen: []int32{ctx}, Tables: []int32{0}, TableStart: []int32{0, 1}, BlockSize: 8, Slots: []int32{ctx - 1}}
	k0, v0, kc0, vc0 := randF(r, heads*hd), randF(r, heads*hd), randF(r, 8*heads*hd), randF(r, 8*heads*hd)
	q0 := randF(r, heads*hd)
	q16 := make([]float32, len(q0))
	for i, v := range q0 {
		q0[i] = v + 1e-4 // not a float16 value
		q16[i] = quant.F16ToF32(quant.F32ToF16(q0[i]))
	}
	sh := kernels.AttnShape{Heads: heads, KVHeads: heads, HeadDim: hd, Scale: 0.25}
	for _, half := range []bool{true, false} {
		b := New(Options{Threads: 1, KVF16: half})
		run := func(q []float32) []float32 {
			mk := func(rows int, src []float32) kernels.Tensor {
				tt := b.Alloc(rows, heads*hd)
				copy(b.ToHost(tt, rows), src)
				return tt
			}
			kc, vc := b.AllocKV(8, heads*hd), b.AllocKV(8, heads*hd)
			for _, c := range []struct {
				t   kernels.Tensor
				src []float32
			}{{kc, kc0}, {vc, vc0}} {
				h := c.t.(*kernels.Host)
				for i, x := range c.src {
					if half {
						h.H[i] = quant.F32ToF16(x)
					} else {
						h.F[i] = x
					}
				}
			}
			o := b.Alloc(1, heads*hd)
			b.WriteKV(kc, vc, mk(1, k0), mk(1, v0), a)
			b.Attention(o, mk(1, q), kc, vc, a, sh)
			return append([]float32(nil), b.ToHost(o, 1)...)
		}
		g, w := run(q0), run(q16)
		same := true
		for i := range g {
			same = same && g[i] == w[i]
		}
		b.Close()
		if same != half {
			t.Fatalf("half=%v: outputs of a query and its float16 rounding equal: %v", half, same)
		}
	}
}

// TestF16OrderKernels checks the ggml-order F16 kernels (attn16.go)
// against float64 products on every length class: whole 32-chunks, a
// float64 tail, and the batched 8-lane order.
func TestF16OrderKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 21))
	for _, n := range []int{8, 32, 40, 64, 100, 128} {
		q, kf := randF(r, n), randF(r, n)
		k := make([]uint16, n)
		var want float64
		for i := range q {
			q[i] = quant.F16ToF32(quant.F32ToF16(q[i]))
			k[i] = quant.F32ToF16(kf[i])
			want += float64(q[i]) * float64(quant.F16ToF32(k[i]))
		}
		for _, batched := range []bool{false, true} {
			if got := dotF16Order(q, k, batched); math.Abs(float64(got)-want) > 1e-5*(1+math.Abs(want)) {
				t.Fatalf("n=%d batched=%v: dot %v, want %v", n, batched, got, want)
			}
		}
	}
	// p·v over positions scattered in blocks of 4, 3 kv heads of 16
	const hd, bs, heads = 16, 4, 3
	for _, n := range []int{1, 7, 33, 70} {
		p := randF(r, n)
		nb := (n + bs - 1) / bs
		table := make([]int32, nb)
		for i, j := range r.Perm(nb + 2)[:nb] {
			table[i] = int32(j)
		}
		v := make([]uint16, (nb+2)*bs*heads*hd)
		for i := range v {
			v[i] = quant.F32ToF16(float32(r.NormFloat64()))
		}
		off := hd // the second kv head
		part := make([]float32, 32*hd)
		for _, batched := range []bool{false, true} {
			out := make([]float32, hd)
			wsumF16Order(p, v, table, bs, heads*hd, off, out, part, batched)
			for d := range out {
				var want float64
				for pos, w := range p {
					want += float64(w) * float64(quant.F16ToF32(v[(int(table[pos/bs])*bs+pos%bs)*heads*hd+off+d]))
				}
				if math.Abs(float64(out[d])-want) > 1e-5*(1+math.Abs(want)) {
					t.Fatalf("n=%d batched=%v d=%d: %v, want %v", n, batched, d, out[d], want)
				}
			}
		}
	}
}

// TestScoresWsum checks every kernel variant's key scores and weighted
// value sums, over float32 and float16 caches, against plain loops on
// every head size the assembly specialises (multiples of 8, 32 and 64)
// and key counts around the 4-key unroll.
func TestScoresWsum(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for _, hd := range []int{8, 12, 16, 32, 48, 64, 96, 128} {
		for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 16, 17} {
			stride := 3*hd + 8
			q, w := randF(r, hd), randF(r, n)
			kc := randF(r, (n-1)*stride+hd)
			kh := make([]uint16, len(kc))
			for i, x := range kc {
				kh[i] = quant.F32ToF16(x)
				kc[i] = quant.F16ToF32(kh[i])
			}
			wantS, wantW := make([]float32, n), make([]float32, hd)
			for p := 0; p < n; p++ {
				wantS[p] = kernels.Dot(q, kc[p*stride:p*stride+hd])
				for d := range wantW {
					wantW[d] += w[p] * kc[p*stride+d]
				}
			}
			for name, k := range kerns() {
				for _, half := range []bool{false, true} {
					gotS, gotW := make([]float32, n), make([]float32, hd)
					if half {
						k.scoresH(q, kh, stride, gotS)
						k.wsumH(w, kh, stride, gotW)
					} else {
						k.scores(q, kc, stride, gotS)
						k.wsum(w, kc, stride, gotW)
					}
					for p := range wantS {
						if !close32(gotS[p], wantS[p], 1e-5) {
							t.Fatalf("%s half=%v hd=%d n=%d: score %d = %v, want %v", name, half, hd, n, p, gotS[p], wantS[p])
						}
					}
					for d := range wantW {
						if !close32(gotW[d], wantW[d], 1e-5) {
							t.Fatalf("%s half=%v hd=%d n=%d: wsum %d = %v, want %v", name, half, hd, n, d, gotW[d], wantW[d])
						}
					}
				}
			}
		}
	}
}
