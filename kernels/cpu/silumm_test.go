package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// TestSiLUMulMatMul checks SiLUMulMatMul against SiLUMul followed by
// MatMul, bit for bit in both the product (gate) and the projection
// (out), for F16 and BF16 (the fused panel path at 2–16 rows) and types
// and shapes that take the two ops (F32, Q4_K, rows past 16, rows not a
// multiple of siluPackCols), with each kernel variant (AVX-512, AVX2
// alone) and one or two threads; and that the fused path is taken where
// it should be.
func TestSiLUMulMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 1))
	for _, v := range []string{"", "avx2"} {
		for _, threads := range []int{1, 2} {
			for _, dt := range []kernels.DType{kernels.F16, kernels.BF16, kernels.F32, kernels.Q4_K} {
				for _, k := range []int{256, 768, 2048, 200} {
					if (dt == kernels.Q4_K && k%256 != 0) || (dt != kernels.F32 && k%8 != 0) {
						continue
					}
					for _, wr := range []int{1, 5, 16, 97} {
						for _, n := range []int{1, 2, 3, 7, 8, 9, 13, 15, 16, 17, 33} {
							name := fmt.Sprintf("%s/threads=%d/%v/k=%d/wrows=%d/rows=%d", v, threads, dt, k, wr, n)
							t.Run(name, func(t *testing.T) {
								checkSiLUMulMatMul(t, r, v, threads, dt, k, wr, n)
							})
						}
					}
				}
			}
		}
	}
}

func checkSiLUMulMatMul(t *testing.T, r *rand.Rand, v string, threads int, dt kernels.DType, k, wr, n int) {
	be := New(Options{Threads: threads})
	defer be.Close()
	if !padVariants(be, v) {
		t.Skip("variant not on this machine")
	}
	var w kernels.Tensor
	if dt == kernels.F32 {
		w = &kernels.Host{R: wr, C: k, DT: kernels.F32, F: randF(r, wr*k)}
	} else {
		data := randBlocks(r, dt, wr, k)
		sanitizeHalves(dt, data)
		var err error
		if w, err = kernels.NewHostWeight(dt, wr, k, data); err != nil {
			t.Fatal(err)
		}
	}
	g0, u0 := randF(r, n*k), randF(r, n*k)
	for j := 0; j < k; j += 7 {
		g0[j] *= 30 // the exponential's far ends
		g0[(n-1)*k+j] *= -30
	}
	mk := func(src []float32) *kernels.Host {
		return &kernels.Host{R: n, C: k, DT: kernels.F32, F: append([]float32(nil), src...)}
	}
	wantG, gotG, u := mk(g0), mk(g0), mk(u0)
	want, got := be.Alloc(n, wr), be.Alloc(n, wr)
	be.SiLUMul(wantG, wantG, u, n)
	be.MatMul(want, wantG, w, n)
	be.SiLUMulMatMul(got, gotG, u, w, n)
	for i, x := range gotG.F {
		if math.Float32bits(x) != math.Float32bits(wantG.F[i]) {
			t.Fatalf("gate[%d] = %v, want %v (SiLUMul)", i, x, wantG.F[i])
		}
	}
	wf, gf := want.(*kernels.Host).F, got.(*kernels.Host).F
	for i := range gf {
		if math.Float32bits(gf[i]) != math.Float32bits(wf[i]) {
			t.Fatalf("out[%d] = %v, want %v (SiLUMul then MatMul)", i, gf[i], wf[i])
		}
	}
	half := dt == kernels.F16 || dt == kernels.BF16
	wantFused := half && threads == 2 && n >= 2 && n <= 16 && k%siluPackCols == 0 && be.k.avx2 &&
		((be.k.simd && n >= halfPanelZMinRows) || (!be.k.simd && usePanels(dt, n, k))) && be.padTo(w.(*kernels.Host), n) == n
	if got := be.siluPacks(gotG, u, w.(*kernels.Host), n); got != wantFused {
		t.Errorf("siluPacks = %v, want %v", got, wantFused)
	}
}

// TestSiLUMulMatMulAllocs checks that the fused op allocates nothing once
// its buffers have grown (the decode path at 16 rows of the 1B shape's
// down projection, F16 and BF16).
func TestSiLUMulMatMulAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 2))
	const n, k, wr = 16, 8192, 64
	be := New(Options{Threads: 2})
	defer be.Close()
	for _, dt := range []kernels.DType{kernels.F16, kernels.BF16} {
		data := randBlocks(r, dt, wr, k)
		sanitizeHalves(dt, data)
		w, err := kernels.NewHostWeight(dt, wr, k, data)
		if err != nil {
			t.Fatal(err)
		}
		g := &kernels.Host{R: n, C: k, DT: kernels.F32, F: randF(r, n*k)}
		u := &kernels.Host{R: n, C: k, DT: kernels.F32, F: randF(r, n*k)}
		out := be.Alloc(n, wr)
		be.SiLUMulMatMul(out, g, u, w, n)
		if a := testing.AllocsPerRun(20, func() { be.SiLUMulMatMul(out, g, u, w, n) }); a != 0 {
			t.Errorf("%v: SiLUMulMatMul allocates %v times per call, want 0", dt, a)
		}
	}
}
