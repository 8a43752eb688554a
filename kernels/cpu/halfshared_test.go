package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// halfSharedCases are MatMulShared calls on F16/BF16 weights: q/k/v- and
// gate/up-like groups, row counts that are not multiples of 16 (chunks
// spanning two weights), K with a tail past the last multiple of 8.
var halfSharedCases = []sharedCase{
	{"qkv-f16", []kernels.DType{kernels.F16, kernels.F16, kernels.F16}, []int{128, 32, 32}, 264, true},
	{"gate-up-bf16", []kernels.DType{kernels.BF16, kernels.BF16}, []int{200, 200}, 512, true},
	{"odd-f16-bf16", []kernels.DType{kernels.F16, kernels.BF16, kernels.F16}, []int{67, 9, 13}, 260, true},
	{"four", []kernels.DType{kernels.BF16, kernels.BF16, kernels.BF16, kernels.BF16}, []int{40, 17, 40, 1}, 1032, true},
	{"short-k", []kernels.DType{kernels.F16, kernels.F16}, []int{50, 50}, 5, false},
	{"with-q8", []kernels.DType{kernels.F16, kernels.Q8_0}, []int{64, 64}, 512, false},
}

// TestMatMulSharedHalf checks that MatMulShared on F16/BF16 weights equals
// one MatMul per weight bit for bit at 1–17 activation rows, on 1 and 2
// threads, with and without AVX-512 (kern.simd), writes every output, and
// runs as one panel op exactly where the weights all take the one-panel
// path (8–16 rows; BF16 only without AVX-512).
func TestMatMulSharedHalf(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(23, 8))
	for _, simd := range []bool{true, false} {
		if simd && !hasAVX512 {
			continue
		}
		for _, threads := range []int{1, 2} {
			b := New(Options{Threads: threads, QuantizeActivations: true})
			b.k.simd = simd
			for _, c := range halfSharedCases {
				ws := sharedWeights(t, r, c)
				for _, n := range []int{1, 2, 7, 8, 9, 15, 16, 17} {
					t.Run(fmt.Sprintf("simd%v/t%d/%s/n%d", simd, threads, c.name, n), func(t *testing.T) {
						x := &kernels.Host{R: n, C: c.in, DT: kernels.F32, F: randF(r, n*c.in)}
						outs := make([]kernels.Tensor, len(ws))
						for i := range ws {
							o := &kernels.Host{R: n, C: c.rows[i], DT: kernels.F32, F: make([]float32, n*c.rows[i])}
							for j := range o.F {
								o.F[j] = float32(math.NaN())
							}
							outs[i] = o
						}
						want := c.one && n >= 8 && n <= 16
						for _, dt := range c.dts {
							want = want && (simd || dt == kernels.BF16)
						}
						if got := b.sharedHalfPanels(ws, n); got != want {
							t.Errorf("sharedHalfPanels %v, want %v", got, want)
						}
						b.MatMulShared(outs, x, ws, n)
						for i, w := range ws {
							ref := &kernels.Host{R: n, C: c.rows[i], DT: kernels.F32, F: make([]float32, n*c.rows[i])}
							b.MatMul(ref, x, w, n)
							got := outs[i].(*kernels.Host).F
							for j := range ref.F {
								if math.Float32bits(got[j]) != math.Float32bits(ref.F[j]) {
									t.Fatalf("weight %d [%d,%d]: shared %v, MatMul %v", i, j/c.rows[i], j%c.rows[i], got[j], ref.F[j])
								}
							}
						}
					})
				}
			}
			b.Close()
		}
	}
}

// TestMatMulSharedHalfAllocs checks that the one-panel MatMulShared op
// allocates nothing once its buffers have grown.
func TestMatMulSharedHalfAllocs(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(1, 3))
	c := halfSharedCases[0]
	ws := sharedWeights(t, r, c)
	b := New(Options{Threads: 2})
	defer b.Close()
	const n = 16
	x := &kernels.Host{R: n, C: c.in, DT: kernels.F32, F: randF(r, n*c.in)}
	outs := make([]kernels.Tensor, len(ws))
	for i := range ws {
		outs[i] = b.Alloc(n, c.rows[i])
	}
	if !b.sharedHalfPanels(ws, n) {
		t.Skip("the weights do not run as one panel op on this machine")
	}
	b.MatMulShared(outs, x, ws, n)
	allocs := testing.AllocsPerRun(50, func() {
		x.F[0]++
		b.MatMulShared(outs, x, ws, n)
	})
	if allocs != 0 {
		t.Errorf("MatMulShared allocates %v times per call", allocs)
	}
}
