package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// quantize is the tests' quantizer: n rows of x (k values each, xs apart)
// quantized in blocks of blk, with every layout any weight type with that
// block reads under k8 (so that a test may run any tile on them).
func (a *actQ) quantize(k8 kern, x []float32, xs, n, k, blk int) {
	a.quantizeRows(k8, x, xs, n, k, blk)
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K} {
		if _, b := quantized(dt); b == blk {
			a.derive(k8, dt, 0)
		}
	}
}

// TestDeriveLayouts checks that quantizeFor makes, for each weight type,
// exactly the layouts its tiles read (tileLayouts), each equal to the one
// made from scratch, that a second type on the same rows adds only its
// own, and that new rows drop them all.
func TestDeriveLayouts(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 17))
	const k, n = 512, 19
	x := randF(r, n*k)
	ks := []kern{{}, {avx2: hasAVX2}, {avx2: hasAVX2, vnni: true, k4v: true}}
	types := []kernels.DType{kernels.Q8_0, kernels.Q4_0, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K, kernels.MXFP4}
	lens := func(a *actQ) map[layouts]int {
		return map[layouts]int{layD8: len(a.d8), layKT: len(a.kt), layBP: len(a.bp), layKV: len(a.kv), layS8: len(a.s8), layQT: len(a.qt)}
	}
	for _, k8 := range ks {
		if (k8.vnni || k8.k4v) && !hasK4V {
			continue
		}
		for _, first := range types {
			for _, second := range types {
				var a actQ
				a.quantizeFor(k8, first, x, k, n, k, n, 0)
				_, b1 := quantized(first)
				_, b2 := quantized(second)
				a.quantizeFor(k8, second, x, k, n, k, n, 0)
				want := tileLayouts(k8, second)
				if b1 == b2 {
					want |= tileLayouts(k8, first)
				}
				if a.built != want {
					t.Fatalf("%+v %v then %v: built %b, want %b", k8, first, second, a.built, want)
				}
				var ref actQ // the same rows, every layout from scratch
				ref.quantize(k8, x, k, n, k, b2)
				for l, got := range lens(&a) {
					if want&l == 0 && got != 0 {
						t.Fatalf("%+v %v then %v: layout %b has %d values, want none", k8, first, second, l, got)
					}
					if want&l != 0 && got != lens(&ref)[l] {
						t.Fatalf("%+v %v then %v: layout %b has %d values, want %d", k8, first, second, l, got, lens(&ref)[l])
					}
				}
				if want&layD8 != 0 && !equalSlices(a.d8, ref.d8) || want&layKT != 0 && !equalSlices(a.kt, ref.kt) ||
					want&layBP != 0 && !equalSlices(a.bp, ref.bp) || want&layKV != 0 && !equalSlices(a.kv, ref.kv) ||
					want&layS8 != 0 && !equalSlices(a.s8, ref.s8) || want&layQT != 0 && !equalSlices(a.qt, ref.qt) {
					t.Fatalf("%+v %v then %v: a layout differs from the one made from scratch", k8, first, second)
				}
				// new rows: nothing derived is kept
				a.quantizeRows(k8, x[k:], k, n-1, k, b2)
				if a.built != 0 {
					t.Fatalf("%+v: new rows kept layouts %b", k8, a.built)
				}
				for l, got := range lens(&a) {
					if got != 0 {
						t.Fatalf("%+v: new rows kept layout %b (%d values)", k8, l, got)
					}
				}
			}
		}
	}
}

// equalSlices reports whether a and b hold the same values.
func equalSlices[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDeriveAllocs checks that a step's MatMuls on repeated rows of one
// shape allocate nothing once the buffers have grown: new rows for each
// type in turn.
func TestDeriveAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 1))
	const k, n = 512, 16
	xs := [2][]float32{randF(r, n*k), randF(r, n*k)}
	k8 := kern{avx2: hasAVX2, vnni: hasK4V, k4v: hasK4V}
	var a actQ
	types := []kernels.DType{kernels.Q4_K, kernels.Q6_K, kernels.Q8_0, kernels.Q4_0, kernels.Q5_K, kernels.MXFP4}
	step := 0
	run := func() {
		for _, dt := range types {
			a.quantizeFor(k8, dt, xs[step%2], k, n, k, n, 0)
			step++
		}
	}
	run()
	if allocs := testing.AllocsPerRun(20, run); allocs != 0 {
		t.Fatalf("%v allocations per step, want 0", allocs)
	}
}

// BenchmarkActQuantize measures quantizing 16 new rows of 2048 values for
// one MatMul of each weight type, with the layouts its tiles read
// (quantizeFor), on the VNNI kernels where the machine has them.
func BenchmarkActQuantize(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 9))
	const k, n = 2048, 16
	xs := [2][]float32{randF(r, n*k), randF(r, n*k)}
	k8 := kern{avx2: hasAVX2, vnni: hasK4V, k4v: hasK4V}
	for _, dt := range []kernels.DType{kernels.Q4_K, kernels.Q5_K, kernels.Q6_K, kernels.Q8_0, kernels.Q4_0, kernels.MXFP4} {
		b.Run(dt.String(), func(b *testing.B) {
			var a actQ
			c0 := processCPU()
			for i := 0; b.Loop(); i++ {
				a.quantizeFor(k8, dt, xs[i%2], k, n, k, n, 0)
			}
			b.ReportMetric(float64(processCPU()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}
