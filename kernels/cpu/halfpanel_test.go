package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// halfPanelDepth is how many additions deep the panel path sums one
// output of a reduction of in values: the longer of its two chunk sets,
// the final add, and the tail of in mod 8 added after.
func halfPanelDepth(in int) int {
	k8 := in &^ 7
	chunks := (k8 + halfPanelKc - 1) / halfPanelKc
	return min(k8, (chunks+1)/2*halfPanelKc) + 2 + in - k8
}

// TestHalfPanels runs the panel path directly on ragged shapes (batches
// around the 16-row panels, weight rows around the 6-row kernels, the
// 48-row blocks and the 384-row ranges, reductions with every tail modulo
// 8 and across several chunks) on a sub-range of the weight rows, and
// checks it against the float64 product within the rounding bound of its
// summation depth, and that no output outside the sub-range changed.
func TestHalfPanels(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 46))
	cases := []struct{ n, rows, in int }{
		{8, 1, 8}, {9, 5, 24}, {15, 6, 256}, {16, 7, 264}, {17, 13, 513},
		{31, 47, 1031}, {32, 49, 520}, {33, 100, 64}, {64, 2*halfPanelRange + 7, 40}, {16, 390, 2056}, {40, 60, halfKc + 264},
	}
	for _, dt := range halfTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/n%d/%dx%d", dt, c.n, c.rows, c.in), func(t *testing.T) {
				data := randBlocks(r, dt, c.rows, c.in)
				sanitizeHalves(dt, data)
				w, err := kernels.NewHostWeight(dt, c.rows, c.in, data)
				if err != nil {
					t.Fatal(err)
				}
				xf := randF(r, c.n*c.in)
				_, onAct, _, mag := storedRef(w, xf, c.n)
				x := &kernels.Host{R: c.n, C: c.in, F: xf}
				out := &kernels.Host{R: c.n, C: c.rows, F: make([]float32, c.n*c.rows)}
				sentinel := float32(math.Inf(-1))
				for i := range out.F {
					out.F[i] = sentinel
				}
				lo, hi := c.rows/5, c.rows-c.rows/7
				q := &qmatTask{k: kern{avx2: true}, out: out, x: x, w: w, n: c.n}
				q.prepareHalf(1)
				q.halfPanels(lo, hi, &q.hp[0])
				// with the activations packed once for the MatMul
				// (packPanels, where the type's batches run on this
				// path, one panel or more), the same bits
				out2 := &kernels.Host{R: c.n, C: c.rows, F: slices.Clone(out.F)}
				q2 := &qmatTask{k: kern{avx2: true}, out: out2, x: x, w: w, n: c.n}
				q2.prepareHalf(1)
				q2.packPanels()
				if want := usePanels(dt, c.n, c.in); (q2.xpN == c.n) != want {
					t.Fatalf("packPanels packed %d rows, want packed: %v", q2.xpN, want)
				}
				q2.halfPanels(lo, hi, &q2.hp[0])
				for i := range out.F {
					if math.Float32bits(out.F[i]) != math.Float32bits(out2.F[i]) {
						t.Fatalf("[%d,%d] = %v packed once, %v packed per range", i/c.rows, i%c.rows, out2.F[i], out.F[i])
					}
				}
				tol := func(j int) float64 {
					return float64(halfPanelDepth(c.in))*0x1p-24*mag[j]*1.01 + 1e-6
				}
				for m := 0; m < c.n; m++ {
					for o := 0; o < c.rows; o++ {
						got, j := out.F[m*c.rows+o], m*c.rows+o
						if o < lo || o >= hi {
							if got != sentinel {
								t.Fatalf("[%d,%d] outside rows [%d,%d) was written: %v", m, o, lo, hi, got)
							}
							continue
						}
						if d := math.Abs(float64(got) - onAct[j]); d > tol(j) {
							t.Fatalf("[%d,%d] = %v, float64 product %v (tol %g)", m, o, got, onAct[j], tol(j))
						}
					}
				}
			})
		}
	}
}

// TestHalfPanelKernels checks the kernels against each other and against
// plain Go: halfPanelWidenAVX2 equals halfPanelAVX2 on the widened rows
// bit for bit, halfPanelAVX2 equals the same sums done in order with
// fused multiply-adds, and packPanel8AVX2 is the transposition.
func TestHalfPanelKernels(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 47))
	for _, dt := range halfTypes {
		for W := 1; W <= halfPanelMaxW; W++ {
			for _, k := range []int{8, 16, 24, 40, 256} {
				const ws = 264 // weight row stride in values
				data := randBlocks(r, dt, W, ws)
				sanitizeHalves(dt, data)
				wf := make([]float32, W*ws)
				for c := 0; c < W; c++ {
					if dt == kernels.BF16 {
						halfToF32BF16AVX2(&data[2*c*ws], &wf[c*ws], ws)
					} else {
						halfToF32F16AVX2(&data[2*c*ws], &wf[c*ws], ws)
					}
					for i := 0; i < ws; i++ {
						var one [1]float32
						if got, want := wf[c*ws+i], dotHalfGo(dt, data[2*(c*ws+i):], append(one[:0], 1)); math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("%v widen [%d,%d] = %v, want %v", dt, c, i, got, want)
						}
					}
				}
				xp := randF(r, 16*k)
				acc0 := randF(r, 16*W)
				want := append([]float32(nil), acc0...)
				for c := 0; c < W; c++ {
					for j := 0; j < 16; j++ {
						for i := 0; i < k; i++ {
							want[16*c+j] = float32(math.FMA(float64(xp[16*i+j]), float64(wf[c*ws+i]), float64(want[16*c+j])))
						}
					}
				}
				got := append([]float32(nil), acc0...)
				halfPanelAVX2(W, &xp[0], &wf[0], ws, k, &got[0])
				gotW := append([]float32(nil), acc0...)
				var buf [8 * halfPanelMaxW]float32
				halfPanelWidenAVX2(dt == kernels.BF16, W, &xp[0], &data[0], 2*ws, k, &gotW[0], &buf[0])
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.Float32bits(gotW[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v W=%d k=%d acc[%d]: widened %v, stored %v, want %v", dt, W, k, i, got[i], gotW[i], want[i])
					}
				}
			}
		}
	}
	for _, k := range []int{8, 24, 256} {
		const xs = 300
		x := randF(r, 8*xs)
		xp := randF(r, 16*k)
		before := append([]float32(nil), xp...)
		packPanel8AVX2(&x[0], xs, k, &xp[8])
		for i := 0; i < k; i++ {
			for j := 0; j < 16; j++ {
				want := before[16*i+j]
				if j >= 8 {
					want = x[(j-8)*xs+i]
				}
				if xp[16*i+j] != want {
					t.Fatalf("k=%d xp[%d·16+%d] = %v, want %v", k, i, j, xp[16*i+j], want)
				}
			}
		}
	}
}

// TestHalfPanelAllocs checks that MatMuls on the panel path (16 rows, and
// more with the activations packed once per MatMul) allocate nothing once
// the workers' scratch and the packed buffer have grown.
func TestHalfPanelAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 48))
	// one panel (BF16), and two panels or more on both types (F16 with K
	// past the tiles' slice), whose activations packPanels packs into a
	// buffer that grows once
	for _, c := range []struct {
		dt          kernels.DType
		n, rows, in int
	}{{kernels.BF16, 16, 200, 520}, {kernels.BF16, 40, 100, 520}, {kernels.F16, 40, 100, halfKc + 64}} {
		t.Run(fmt.Sprintf("%v/n%d", c.dt, c.n), func(t *testing.T) {
			data := randBlocks(r, c.dt, c.rows, c.in)
			sanitizeHalves(c.dt, data)
			w, err := kernels.NewHostWeight(c.dt, c.rows, c.in, data)
			if err != nil {
				t.Fatal(err)
			}
			be := New(Options{Threads: 2})
			defer be.Close()
			x := &kernels.Host{R: c.n, C: c.in, F: randF(r, c.n*c.in)}
			out := be.Alloc(c.n, c.rows)
			be.MatMul(out, x, w, c.n)
			if a := testing.AllocsPerRun(20, func() {
				x.F[0]++
				be.MatMul(out, x, w, c.n)
			}); a != 0 {
				t.Errorf("%v allocations per call", a)
			}
		})
	}
}

// BenchmarkHalfPanelL1 times the halfPanel kernels on one chunk of
// halfPanelKc values, panel and widened weights in L1, on one thread: the
// kernels' arithmetic alone (compare with BenchmarkHalfTileL1).
func BenchmarkHalfPanelL1(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 44))
	for _, W := range []int{6, 4} {
		b.Run(fmt.Sprintf("widened/16x%d", W), func(b *testing.B) {
			kc := halfPanelKc
			xp := randF(r, 16*kc)
			w := randF(r, W*kc)
			acc := make([]float32, 16*W)
			b.ResetTimer()
			c0 := processCPU()
			for i := 0; i < b.N; i++ {
				halfPanelAVX2(W, &xp[0], &w[0], kc, kc, &acc[0])
			}
			if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
				b.ReportMetric(float64(16*W*kc)*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
			}
		})
		for _, dt := range halfTypes {
			b.Run(fmt.Sprintf("%v/16x%d", dt, W), func(b *testing.B) {
				kc := halfPanelKc
				xp := randF(r, 16*kc)
				w := randBlocks(r, dt, W, kc)
				acc := make([]float32, 16*W)
				var buf [8 * halfPanelMaxW]float32
				b.ResetTimer()
				c0 := processCPU()
				for i := 0; i < b.N; i++ {
					halfPanelWidenAVX2(dt == kernels.BF16, W, &xp[0], &w[0], 2*kc, kc, &acc[0], &buf[0])
				}
				if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
					b.ReportMetric(float64(16*W*kc)*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
				}
			})
		}
	}
}

// BenchmarkHalfBatchPaths times one thread's share of an F16 MatMul at
// the 1B shapes on the register tiles of half.go ("tile") and on the panel
// path ("panel"), in the same process, so that runs can alternate.
func BenchmarkHalfBatchPaths(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 45))
	for _, dt := range halfTypes {
		for _, s := range halfBenchShapes {
			for _, n := range []int{16, 128} {
				data := randBlocks(r, dt, s.out, s.in)
				w, err := kernels.NewHostWeight(dt, s.out, s.in, data)
				if err != nil {
					b.Fatal(err)
				}
				x := &kernels.Host{R: n, C: s.in, F: randF(r, n*s.in)}
				out := &kernels.Host{R: n, C: s.out, F: make([]float32, n*s.out)}
				for _, path := range []string{"tile", "panel"} {
					b.Run(fmt.Sprintf("%v/%dx%d/n%d/%s", dt, s.out, s.in, n, path), func(b *testing.B) {
						t := &qmatTask{k: kern{avx2: true}, out: out, x: x, w: w, n: n}
						t.prepareHalf(1)
						b.ResetTimer()
						c0 := processCPU()
						for i := 0; i < b.N; i++ {
							if path == "tile" {
								t.halfBatch(0, s.out)
							} else {
								t.halfPanels(0, s.out, &t.hp[0])
							}
						}
						if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
							b.ReportMetric(float64(n*s.out*s.in)*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
						}
					})
				}
			}
		}
	}
}

var halfBenchShapes = []struct{ out, in int }{{2048, 2048}, {2048, 8192}}

// TestUsePanels pins which F16/BF16 batches run on the panel path: BF16
// from halfPanelMinRows rows, F16 from two panels (17 rows) where K is
// longer than the tiles' slice, nothing else.
func TestUsePanels(t *testing.T) {
	cases := []struct {
		dt   kernels.DType
		n, k int
		want bool
	}{
		{kernels.BF16, halfPanelMinRows - 1, 2048, false},
		{kernels.BF16, halfPanelMinRows, 64, true},
		{kernels.BF16, 128, 8192, true},
		{kernels.F16, 16, 8192, false},
		{kernels.F16, 17, 8192, true},
		{kernels.F16, 128, halfKc, false},
		{kernels.F16, 128, halfKc + 8, true},
		{kernels.F32, 128, 8192, false},
		{kernels.Q8_0, 128, 8192, false},
	}
	for _, c := range cases {
		if got := usePanels(c.dt, c.n, c.k); got != c.want {
			t.Errorf("usePanels(%v, %d, %d) = %v, want %v", c.dt, c.n, c.k, got, c.want)
		}
	}
}

// TestPrefetchRows prefetches row spans that end exactly at the end of
// their slice (lengths that are no multiple of a cache line included):
// a hint that neither faults nor changes the data.
func TestPrefetchRows(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	for _, c := range []struct{ stride, n, nb int }{{64, 1, 64}, {100, 3, 16}, {4096, 5, 4096}, {520, 7, 520}, {8, 0, 8}} {
		w := make([]byte, max(1, (c.n-1)*c.stride+c.nb))
		for i := range w {
			w[i] = byte(i)
		}
		prefetchRows(w, c.stride, c.n, c.nb)
		for i := range w {
			if w[i] != byte(i) {
				t.Fatalf("%+v: byte %d changed", c, i)
			}
		}
	}
}
