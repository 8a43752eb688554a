package cpu

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

func randF(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func close32(a, b, tol float32) bool {
	d := float32(math.Abs(float64(a - b)))
	return d <= tol*(1+float32(math.Abs(float64(b))))
}

// kerns returns the kernel variants this machine can run.
func kerns() map[string]kern {
	m := map[string]kern{"go": {simd: false}}
	if hasAVX512 {
		m["avx512"] = kern{simd: true}
	}
	if hasAVX2 {
		m["avx2"] = kern{avx2: true}
	}
	return m
}

// checkMatMul compares Backend.MatMul with the reference on one shape.
func checkMatMul(t *testing.T, r *rand.Rand, n, out, in int, q8 bool, threads int) {
	t.Helper()
	x := &kernels.Host{R: n, C: in, F: randF(r, n*in)}
	wf := randF(r, out*in)
	var w *kernels.Host
	if q8 {
		// every other shape carries decoded block scales (S), which the
		// AVX512_VNNI kernel uses where the CPU has it
		w, _ = kernels.NewHostWeight(kernels.Q8_0, out, in, quant.QuantizeQ8_0(wf))
		if (n+out)%2 == 0 {
			w.S = make([]float32, out*in/kernels.Q8Block)
			for i := range w.S {
				w.S[i] = quant.F16ToF32(uint16(w.Q[i*kernels.Q8BlockBytes]) | uint16(w.Q[i*kernels.Q8BlockBytes+1])<<8)
			}
		}
	} else {
		w = &kernels.Host{R: out, C: in, F: wf}
	}
	want := &kernels.Host{R: n, C: out, F: make([]float32, n*out)}
	kernels.MatMulRef(want, x, w, n)
	// With quantized activations (Q8_0 weights)
	// the product must equal the reference on the dequantized activations,
	// and stay within the activation-rounding bound of the exact product.
	// Q8_0 products quantize the activations for any number of rows (the
	// stored path, and the AVX512_VNNI kernel below 4 rows)
	q8act := q8
	var wantQ *kernels.Host
	var bound []float32
	if q8act {
		wantQ = &kernels.Host{R: n, C: out, F: make([]float32, n*out)}
		xd := dequantAct(x, n)
		kernels.MatMulRef(wantQ, xd, w, n)
		bound = actBound(x, w, n)
	}
	for _, exact := range []bool{false, true} {
		for _, v := range []struct{ plain, packed bool }{{false, false}, {true, false}, {false, true}} {
			plain := v.plain
			b := New(Options{Threads: threads, Plain: plain, QuantizeActivations: !exact})
			wv := w
			if v.packed {
				// a copy, so that the other variants keep the unpacked weight
				wc := *w
				if err := b.PrepareMatMul(&wc, false); err != nil {
					t.Fatal(err)
				}
				if !q8 && (hasAVX512 || hasAVX2) && out >= panelCols && wc.P == nil {
					t.Fatalf("n=%d out=%d in=%d: F32 weight not packed", n, out, in)
				}
				wv = &wc
			}
			got := b.Alloc(n, out).(*kernels.Host)
			b.MatMul(got, x, wv, n)
			b.Close()
			for i := range want.F {
				if q8act && !exact {
					if !close32(got.F[i], wantQ.F[i], 1e-4) || math.Abs(float64(got.F[i]-want.F[i])) > float64(bound[i])*1.001+1e-5 {
						t.Fatalf("n=%d out=%d in=%d q8act plain=%v: [%d] got %v want %v (exact %v, bound %v)", n, out, in, plain, i, got.F[i], wantQ.F[i], want.F[i], bound[i])
					}
					continue
				}
				if !close32(got.F[i], want.F[i], 1e-4) {
					t.Fatalf("n=%d out=%d in=%d q8=%v plain=%v packed=%v: [%d] got %v want %v", n, out, in, q8, plain, v.packed, i, got.F[i], want.F[i])
				}
			}
		}
	}
}

// dequantAct returns the first n rows of x after quantizeQ8Act and back.
func dequantAct(x *kernels.Host, n int) *kernels.Host {
	K := x.C
	nb := K / kernels.Q8Block
	q, d := make([]int8, K), make([]float32, nb)
	out := &kernels.Host{R: n, C: K, F: make([]float32, n*K)}
	for m := 0; m < n; m++ {
		quantizeQ8Act(x.F[m*K:(m+1)*K], q, d)
		for j := range q {
			out.F[m*K+j] = float32(q[j]) * d[j/kernels.Q8Block]
		}
	}
	return out
}

// actBound returns, per output, the activation-rounding error bound
// sum over blocks of d_x/2 * sum |w_j| (w dequantized).
func actBound(x, w *kernels.Host, n int) []float32 {
	K := x.C
	nb := K / kernels.Q8Block
	q, d := make([]int8, K), make([]float32, nb)
	wr := make([]float32, K)
	rb := w.DT.RowBytes(K)
	out := make([]float32, n*w.R)
	for m := 0; m < n; m++ {
		quantizeQ8Act(x.F[m*K:(m+1)*K], q, d)
		for o := 0; o < w.R; o++ {
			quant.DequantizeQ8_0(wr, w.Q[o*rb:(o+1)*rb])
			var s float64
			for j, v := range wr {
				s += float64(d[j/kernels.Q8Block]) / 2 * math.Abs(float64(v))
			}
			out[m*w.R+o] = float32(s)
		}
	}
	return out
}

func TestMatMulShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ n, out, in int }{
		{1, 4, 16}, {1, 7, 64}, {3, 13, 32}, {4, 16, 64}, {5, 17, 172}, {9, 64, 288}, {33, 100, 96}, {70, 36, 64}, {1, 512, 64}, {2, 3, 5},
		{16, 768, 768}, {7, 130, 100}, {11, 64, 1}, {6, 200, 33}, {16, 2048, 768}, {130, 80, 48}, {200, 64, 16},
	} {
		for _, th := range []int{1, 2, 3} {
			checkMatMul(t, r, c.n, c.out, c.in, false, th)
			if c.in%32 == 0 {
				checkMatMul(t, r, c.n, c.out, c.in, true, th)
			}
		}
	}
}

// FuzzMatMul checks the fast matmul against the reference on random shapes.
func FuzzMatMul(f *testing.F) {
	f.Add(uint8(1), uint8(4), uint8(2), false, uint64(1))
	f.Add(uint8(7), uint8(9), uint8(3), true, uint64(2))
	f.Fuzz(func(t *testing.T, n, out, in32 uint8, q8 bool, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 7))
		nn, oo, ii := int(n%80)+1, int(out%70)+1, (int(in32%12)+1)*32
		if !q8 {
			ii -= int(seed % 31)
		}
		checkMatMul(t, r, nn, oo, ii, q8, 2)
	})
}

func TestDotAxpy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for name, k := range kerns() {
		for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 64, 100, 2048} {
			a, b := randF(r, n), randF(r, n)
			want := kernels.Dot(a, b)
			if got := k.dot(a, b); !close32(got, want, 1e-4) {
				t.Errorf("%s dot n=%d: got %v want %v", name, n, got, want)
			}
			y := randF(r, n)
			y2 := append([]float32(nil), y...)
			k.axpy(0.5, a, y)
			for i := range y2 {
				y2[i] += 0.5 * a[i]
				if !close32(y[i], y2[i], 1e-5) {
					t.Fatalf("%s axpy n=%d [%d]: got %v want %v", name, n, i, y[i], y2[i])
				}
			}
		}
	}
}

func TestExpf(t *testing.T) {
	for x := float32(-87); x < 88; x += 0.037 {
		want := math.Exp(float64(x))
		got := float64(expf(x))
		if math.Abs(got-want) > 3e-7*want {
			t.Fatalf("expf(%v) = %v, want %v", x, got, want)
		}
	}
	if expf(-200) != 0 || !math.IsInf(float64(expf(100)), 1) {
		t.Fatal("expf limits")
	}
}

// TestBackendOps runs every Backend op on the CPU backend and on the
// reference backend and compares the results.
func TestBackendOps(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ref := kernels.NewRef()
	for _, plain := range []bool{false, true} {
		cb := New(Options{Threads: 2, Plain: plain})
		bes := []kernels.Backend{ref, cb}
		const (
			heads, kvHeads, hd = 4, 2, 16
			bs, nblocks        = 4, 16
		)
		// three sequences: a prefill chunk over a cached prefix, a fresh
		// prefill, a decode.
		a := &kernels.AttnBatch{
			QStart:     []int32{0, 3, 8, 9},
			CtxLen:     []int32{6, 5, 11},
			Tables:     []int32{3, 1, 0, 2, 9, 8, 7},
			TableStart: []int32{0, 2, 4, 7},
			BlockSize:  bs,
		}
		pos := []int32{3, 4, 5, 0, 1, 2, 3, 4, 10}
		for i, p := range pos {
			sq := 0
			for a.QStart[sq+1] <= int32(i) {
				sq++
			}
			tb := a.Tables[a.TableStart[sq]:a.TableStart[sq+1]]
			a.Slots = append(a.Slots, tb[p/bs]*bs+p%bs)
		}
		rows := len(pos)
		q0 := randF(r, rows*heads*hd)
		k0 := randF(r, rows*kvHeads*hd)
		v0 := randF(r, rows*kvHeads*hd)
		cache0 := randF(r, nblocks*bs*kvHeads*hd)
		w0 := randF(r, hd)
		inv := make([]float64, hd/2)
		for j := range inv {
			inv[j] = math.Pow(10000, -2*float64(j)/hd)
		}
		table := kernels.RoPETable(16, inv)
		var outs [2][]float32
		for bi, be := range bes {
			mk := func(rows, cols int, src []float32) kernels.Tensor {
				tt := be.Alloc(rows, cols)
				copy(be.ToHost(tt, rows), src)
				return tt
			}
			q, k, v := mk(rows, heads*hd, q0), mk(rows, kvHeads*hd, k0), mk(rows, kvHeads*hd, v0)
			kc, vc := mk(nblocks*bs, kvHeads*hd, cache0), mk(nblocks*bs, kvHeads*hd, cache0)
			w, _ := be.WeightF32(1, hd, w0)
			tab, _ := be.WeightF32(16, hd, table)
			be.RMSNorm(q, q, w, rows, 1e-5)
			for _, st := range []kernels.RoPEStyle{kernels.RoPEInterleaved, kernels.RoPEHalf} {
				be.RoPE(q, pos, tab, hd, st)
				be.RoPE(k, pos, tab, hd, st)
			}
			be.WriteKV(kc, vc, k, v, a)
			o := be.Alloc(rows, heads*hd)
			be.Attention(o, q, kc, vc, a, kernels.AttnShape{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 0.25})
			g, u := mk(rows, 8, q0[:rows*8]), mk(rows, 8, k0[:rows*8])
			be.SiLUMul(g, g, u, rows)
			be.Add(o, o, q, rows)
			outs[bi] = append(append([]float32(nil), be.ToHost(o, rows)...), be.ToHost(g, rows)...)
		}
		for i := range outs[0] {
			if !close32(outs[1][i], outs[0][i], 1e-4) {
				t.Fatalf("plain=%v: [%d] cpu %v ref %v", plain, i, outs[1][i], outs[0][i])
			}
		}
		cb.Close()
	}
}

func BenchmarkMatMul(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, c := range []struct {
		name       string
		n, out, in int
		q8         bool
	}{{"gemv768x768", 1, 768, 768, false}, {"gemm128x768x768", 128, 768, 768, false}, {"gemm16x2048x768", 16, 2048, 768, false}, {"gemvQ8_768x768", 1, 768, 768, true}, {"gemv32000x768", 1, 32000, 768, false}, {"gemvQ8_32000x768", 1, 32000, 768, true}, {"gemmQ8_128x768x768", 128, 768, 768, true}, {"gemvQ8act_768x768", 1, 768, 768, true}, {"gemvQ8_768x2048", 1, 768, 2048, true}, {"gemvQ8act_768x2048", 1, 768, 2048, true}, {"gemvQ8act_32000x768", 1, 32000, 768, true}} {
		b.Run(c.name, func(b *testing.B) {
			be := New(Options{QuantizeActivations: strings.Contains(c.name, "Q8act")})
			defer be.Close()
			x := &kernels.Host{R: c.n, C: c.in, F: randF(r, c.n*c.in)}
			wf := randF(r, c.out*c.in)
			var w kernels.Tensor = &kernels.Host{R: c.out, C: c.in, F: wf}
			if c.q8 {
				w, _ = kernels.NewHostWeight(kernels.Q8_0, c.out, c.in, quant.QuantizeQ8_0(wf))
			}
			o := be.Alloc(c.n, c.out)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				be.MatMul(o, x, w, c.n)
			}
			b.ReportMetric(float64(2*c.n*c.out*c.in)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

func TestDequant(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for name, k := range kerns() {
		for _, n := range []int{32, 64, 288, 768} {
			q := quant.QuantizeQ8_0(randF(r, 3*n))
			want := make([]float32, 3*n)
			for row := 0; row < 3; row++ {
				quant.DequantizeQ8_0(want[row*n:(row+1)*n], q[row*n/32*34:])
			}
			got := make([]float32, 3*n)
			k.dequantRows(got, q, n/32*34, 3, n)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s n=%d [%d]: got %v want %v", name, n, i, got[i], want[i])
				}
			}
		}
	}
}

// BenchmarkMatMulModel runs, per iteration, the matrix products of one
// decode step of the 110M shape (12 layers of q, k, v, o, gate, up, down
// and the 32000-row classifier) on distinct weights, so that they stream
// from memory as in a real step; Q8act quantizes the activations.
func BenchmarkMatMulModel(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, c := range []struct {
		name    string
		q8, act bool
		n       int
		packed  bool
	}{{"F32", false, false, 1, false}, {"Q8", true, false, 1, false}, {"Q8act", true, true, 1, false}, {"F32-16", false, false, 16, false}, {"F32-32", false, false, 32, false},
		{"F32packed", false, false, 1, true}, {"F32packed-16", false, false, 16, true}, {"F32packed-32", false, false, 32, true}} {
		b.Run(c.name, func(b *testing.B) {
			be := New(Options{QuantizeActivations: c.act})
			defer be.Close()
			type mm struct{ w, x, o kernels.Tensor }
			var ops []mm
			var macs int
			add := func(out, in int) {
				wf := randF(r, out*in)
				var w kernels.Tensor = &kernels.Host{R: out, C: in, F: wf}
				if c.q8 {
					w, _ = kernels.NewHostWeight(kernels.Q8_0, out, in, quant.QuantizeQ8_0(wf))
				}
				if c.packed {
					if err := be.PrepareMatMul(w, false); err != nil {
						b.Fatal(err)
					}
				}
				ops = append(ops, mm{w, &kernels.Host{R: c.n, C: in, F: randF(r, c.n*in)}, be.Alloc(c.n, out)})
				macs += c.n * out * in
			}
			for l := 0; l < 12; l++ {
				for i := 0; i < 4; i++ {
					add(768, 768)
				}
				add(2048, 768)
				add(2048, 768)
				add(768, 2048)
			}
			add(32000, 768)
			b.ResetTimer()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				for _, op := range ops {
					be.MatMul(op.o, op.x, op.w, c.n)
				}
			}
			b.ReportMetric(float64(2*macs)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/step")
			b.ReportMetric(float64(processCPU()-cpu0)/1e6/float64(b.N), "cpu-ms/step")
		})
	}
}

// TestVectorExp checks the AVX-512 and AVX2 softmax and SiLU loops against
// their scalar twins, including extreme arguments and every tail length.
func TestVectorExp(t *testing.T) {
	for name, fast := range kerns() {
		t.Run(name, func(t *testing.T) { checkVectorExp(t, fast) })
	}
}

func checkVectorExp(t *testing.T, fast kern) {
	r := rand.New(rand.NewPCG(4, 4))
	plain := kern{}
	special := []float32{0, -0.5, 0.5, -88, 88, -103, -150, 89, 1e-8, -1e-8, 20, -20}
	for n := 0; n <= 70; n++ {
		x := randF(r, n)
		for i := range x {
			x[i] *= 30
			if r.IntN(4) == 0 {
				x[i] = special[r.IntN(len(special))]
			}
		}
		a, b := append([]float32(nil), x...), append([]float32(nil), x...)
		sa, sb := fast.softmaxUnnorm(a, 0.7), plain.softmaxUnnorm(b, 0.7)
		if !close32(sa, sb, 1e-5) {
			t.Fatalf("n=%d: softmax sum %v, want %v", n, sa, sb)
		}
		for i := range a {
			if !close32(a[i], b[i], 1e-5) && math.Abs(float64(a[i]-b[i])) > 1e-30 {
				t.Fatalf("n=%d [%d] x=%v: exp %v, want %v", n, i, x[i], a[i], b[i])
			}
		}
		g, u := append([]float32(nil), x...), randF(r, n)
		oa, ob := make([]float32, n), make([]float32, n)
		fast.siluMul(oa, g, u)
		plain.siluMul(ob, g, u)
		for i := range oa {
			if !close32(oa[i], ob[i], 1e-5) && math.Abs(float64(oa[i]-ob[i])) > 1e-30 {
				t.Fatalf("n=%d [%d] g=%v: silu %v, want %v", n, i, g[i], oa[i], ob[i])
			}
		}
	}
}
