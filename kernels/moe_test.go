package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/quant"
)

// TestRefAttentionWindowSinks checks the reference attention with a
// sliding window and sink logits against a float64 computation of
// softmax([sink, q·k_j·scale for j in window]) over one sequence.
func TestRefAttentionWindowSinks(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const heads, kvHeads, hd, bs, ctx = 4, 2, 8, 4, 13
	for _, tc := range []struct {
		window int
		sinks  bool
	}{{0, false}, {0, true}, {5, false}, {5, true}, {1, true}, {40, true}} {
		nb := (ctx + bs - 1) / bs
		table := make([]int32, nb)
		for i := range table {
			table[i] = int32(nb - 1 - i)
		}
		rnd := func(n int) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			return x
		}
		kv := kvHeads * hd
		k, v, q := rnd(ctx*kv), rnd(ctx*kv), rnd(ctx*heads*hd)
		s := AttnShape{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 0.4, Window: tc.window}
		if tc.sinks {
			s.Sinks = rnd(heads)
		}
		be := NewRef()
		kc, vc := be.Alloc(nb*bs, kv), be.Alloc(nb*bs, kv)
		kt, vt, qt, out := be.Alloc(ctx, kv), be.Alloc(ctx, kv), be.Alloc(ctx, heads*hd), be.Alloc(ctx, heads*hd)
		copy(kt.(*Host).F, k)
		copy(vt.(*Host).F, v)
		copy(qt.(*Host).F, q)
		a := &AttnBatch{QStart: []int32{0, ctx}, CtxLen: []int32{ctx}, Tables: table, TableStart: []int32{0, int32(nb)}, BlockSize: bs}
		for p := 0; p < ctx; p++ {
			a.Slots = append(a.Slots, table[p/bs]*bs+int32(p%bs))
		}
		be.WriteKV(kc, vc, kt, vt, a)
		be.Attention(out, qt, kc, vc, a, s)
		got := out.(*Host).F
		for i := 0; i < ctx; i++ {
			first := 0
			if tc.window > 0 {
				first = max(0, i-tc.window+1)
			}
			for h := 0; h < heads; h++ {
				kh := h / (heads / kvHeads)
				sink := math.Inf(-1)
				if tc.sinks {
					sink = float64(s.Sinks[h])
				}
				mx := sink
				sc := make([]float64, i+1)
				for j := first; j <= i; j++ {
					for d := 0; d < hd; d++ {
						sc[j] += float64(q[i*heads*hd+h*hd+d]) * float64(k[j*kv+kh*hd+d])
					}
					sc[j] *= 0.4
					mx = math.Max(mx, sc[j])
				}
				sum := math.Exp(sink - mx)
				for j := first; j <= i; j++ {
					sum += math.Exp(sc[j] - mx)
				}
				for d := 0; d < hd; d++ {
					var want float64
					for j := first; j <= i; j++ {
						want += math.Exp(sc[j]-mx) / sum * float64(v[j*kv+kh*hd+d])
					}
					if g := float64(got[i*heads*hd+h*hd+d]); math.Abs(g-want) > 1e-5 {
						t.Fatalf("window %d sinks %v: row %d head %d [%d]: got %v want %v", tc.window, tc.sinks, i, h, d, g, want)
					}
				}
			}
		}
	}
}

// TestRefExpertOps checks ScatterAdd (repeated rows accumulate),
// ClampedSwiGLU against its formula and MXFP4 MatMul against dequantized
// float64 products.
func TestRefExpertOps(t *testing.T) {
	be := NewRef()
	out := be.Alloc(3, 2)
	copy(out.(*Host).F, []float32{1, 1, 1, 1, 1, 1})
	x := be.Alloc(3, 2)
	copy(x.(*Host).F, []float32{1, 2, 3, 4, 5, 6})
	be.ScatterAdd(out, x, []int32{2, 0, 2}, []float32{0.5, 2, -1})
	if got, want := out.(*Host).F, []float32{7, 9, 1, 1, 1.5 - 5, 2 - 6}; !equal32(got, want) {
		t.Fatalf("ScatterAdd: got %v want %v", got, want)
	}
	g, u := be.Alloc(1, 4), be.Alloc(1, 4)
	copy(g.(*Host).F, []float32{-2, 0.5, 9, 3})
	copy(u.(*Host).F, []float32{1, -9, 2, 8})
	be.ClampedSwiGLU(g, g, u, 1, 1.702, 7)
	for i, tc := range [][2]float64{{-2, 1}, {0.5, -7}, {7, 2}, {3, 7}} {
		want := tc[0] / (1 + math.Exp(-1.702*tc[0])) * (tc[1] + 1)
		if d := math.Abs(float64(g.(*Host).F[i]) - want); d > 1e-5*math.Max(1, math.Abs(want)) {
			t.Fatalf("ClampedSwiGLU[%d] = %v, want %v", i, g.(*Host).F[i], want)
		}
	}
	r := rand.New(rand.NewPCG(3, 3))
	const rows, cols, n = 5, 64, 3
	wf := make([]float32, rows*cols)
	for i := range wf {
		wf[i] = float32(r.NormFloat64())
	}
	var wq []byte
	for o := 0; o < rows; o++ {
		wq = append(wq, quant.QuantizeMXFP4(wf[o*cols:(o+1)*cols])...)
	}
	w, err := be.Weight(MXFP4, rows, cols, wq)
	if err != nil {
		t.Fatal(err)
	}
	xs := be.Alloc(n, cols)
	for i := range xs.(*Host).F {
		xs.(*Host).F[i] = float32(r.NormFloat64())
	}
	o := be.Alloc(n, rows)
	be.MatMul(o, xs, w, n)
	deq := make([]float32, rows*cols)
	quant.DequantizeMXFP4(deq, wq)
	for m := 0; m < n; m++ {
		for j := 0; j < rows; j++ {
			var want float64
			for c := 0; c < cols; c++ {
				want += float64(xs.(*Host).F[m*cols+c]) * float64(deq[j*cols+c])
			}
			if d := math.Abs(float64(o.(*Host).F[m*rows+j]) - want); d > 1e-4 {
				t.Fatalf("MXFP4 MatMul [%d,%d]: got %v want %v", m, j, o.(*Host).F[m*rows+j], want)
			}
		}
	}
}

func equal32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > 1e-6 {
			return false
		}
	}
	return true
}
