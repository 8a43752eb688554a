package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// panelFunc is one R-row panel kernel.
type panelFunc func(x *float32, xs int, p *float32, ps int, k int, out *float32, os int)

// panelVariant is one panel kernel this machine can run.
type panelVariant struct {
	name string
	r    int
	fn   panelFunc
}

// panelKernelSet returns the panel kernels this machine can run: AVX-512
// (plain and prefetching) and AVX2.
func panelKernelSet() []panelVariant {
	var v []panelVariant
	if hasAVX512 {
		v = append(v, panelVariant{"avx512", 6, panel6AVX512}, panelVariant{"avx512", 4, panel4AVX512},
			panelVariant{"avx512", 2, panel2AVX512}, panelVariant{"avx512", 1, panel1AVX512},
			panelVariant{"avx512pf", 6, panel6pfAVX512}, panelVariant{"avx512pf", 4, panel4pfAVX512},
			panelVariant{"avx512pf", 2, panel2pfAVX512}, panelVariant{"avx512pf", 1, panel1pfAVX512})
	}
	if hasAVX2 {
		v = append(v, panelVariant{"avx2", 6, panel6AVX2}, panelVariant{"avx2", 4, panel4AVX2},
			panelVariant{"avx2", 2, panel2AVX2}, panelVariant{"avx2", 1, panel1AVX2})
	}
	return v
}

// panelCase runs every available panel kernel on one shape (r rows of x,
// k columns, xs and os the row strides, rows weight rows packed into one
// block of 64 columns) and checks it against a float64 reference, and that
// every kernel (any R, prefetching or not, either ISA) gives bit-identical outputs
// for the same row: the summation order does not depend on the batch.
func panelCase(t *testing.T, r *rand.Rand, k, xs, os, rows int) {
	t.Helper()
	const R = panelMaxR
	x := randF(r, (R-1)*xs+max(k, 1))
	wf := randF(r, rows*max(k, 1))
	p := packPanels(wf, rows, k)
	if len(p) == 0 {
		p = make([]float32, 1) // k = 0: the kernels read nothing
	}
	var first []float32 // the first kernel's outputs, R rows × 64
	for _, v := range panelKernelSet() {
		isa, rr := v.name, v.r
		// rows beyond what one call takes come from further calls
		got := make([]float32, (R-1)*os+panelBlock)
		for i := range got {
			got[i] = float32(math.NaN()) // every output must be written
		}
		for m := 0; m < R; m += rr {
			n := min(rr, R-m)
			if n != rr {
				break
			}
			v.fn(&x[m*xs], xs, &p[0], k*panelCols, k, &got[m*os], os)
		}
		done := R / rr * rr
		for m := 0; m < done; m++ {
			for c := 0; c < panelBlock; c++ {
				g := got[m*os+c]
				var want, mag float64
				if c < rows {
					for kk := 0; kk < k; kk++ {
						v := float64(x[m*xs+kk]) * float64(wf[c*k+kk])
						want += v
						mag += math.Abs(v)
					}
				}
				if math.Abs(float64(g)-want) > 1e-5*mag+1e-6 || math.IsNaN(float64(g)) {
					t.Fatalf("%s R=%d k=%d xs=%d os=%d rows=%d: out[%d][%d] = %v, want %v", isa, rr, k, xs, os, rows, m, c, g, want)
				}
			}
		}
		if first == nil {
			first = make([]float32, R*panelBlock)
			for m := 0; m < done; m++ {
				copy(first[m*panelBlock:(m+1)*panelBlock], got[m*os:m*os+panelBlock])
			}
			continue
		}
		for m := 0; m < done; m++ {
			for c := 0; c < panelBlock; c++ {
				if g, f := got[m*os+c], first[m*panelBlock+c]; math.Float32bits(g) != math.Float32bits(f) {
					t.Fatalf("%s R=%d k=%d: out[%d][%d] = %v, another kernel gave %v (summation order differs)", isa, rr, k, m, c, g, f)
				}
			}
		}
	}
}

// TestPanelKernels checks the panel kernels of every ISA this machine has
// (AVX-512 and its AVX2 twins) on every k up to 70 (no multiple of 8 or
// 16 assumed), strided rows and ragged weight blocks.
func TestPanelKernels(t *testing.T) {
	if len(panelKernelSet()) == 0 {
		t.Skip("no panel kernels on this CPU")
	}
	r := rand.New(rand.NewPCG(17, 6))
	for k := 0; k <= 70; k++ {
		for _, c := range []struct{ xpad, opad, rows int }{{0, 0, 64}, {3, 5, 64}, {1, 0, 17}, {0, 7, 33}} {
			panelCase(t, r, k, k+c.xpad, panelBlock+c.opad, c.rows)
		}
	}
	for _, k := range []int{127, 128, 129, 768, 1023} {
		panelCase(t, r, k, k+1, panelBlock, 64)
	}
}

// TestPanelMatMul runs Backend.MatMul on packed weights over every row
// count up to 13 (each mix of 6-, 4-, 2- and 1-row calls), ragged column
// blocks and odd k, against the reference, and checks that a batch's rows
// equal the same rows computed alone.
func TestPanelMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 17))
	b := New(Options{Threads: 2})
	defer b.Close()
	for _, c := range []struct{ out, in int }{{16, 1}, {17, 5}, {64, 8}, {65, 9}, {130, 17}, {200, 33}, {64, 100}} {
		for n := 1; n <= 13; n++ {
			t.Run(fmt.Sprintf("n%d-out%d-in%d", n, c.out, c.in), func(t *testing.T) {
				w := &kernels.Host{R: c.out, C: c.in, F: randF(r, c.out*c.in)}
				x := &kernels.Host{R: n, C: c.in, F: randF(r, n*c.in)}
				want := &kernels.Host{R: n, C: c.out, F: make([]float32, n*c.out)}
				kernels.MatMulRef(want, x, w, n)
				wp := *w
				if err := b.PrepareMatMul(&wp, false); err != nil {
					t.Fatal(err)
				}
				if (hasAVX2 || hasAVX512) && wp.P == nil {
					t.Fatal("weight not packed")
				}
				got := b.Alloc(n, c.out).(*kernels.Host)
				b.MatMul(got, x, &wp, n)
				for i := range want.F {
					if !close32(got.F[i], want.F[i], 1e-4) {
						t.Fatalf("[%d] got %v want %v", i, got.F[i], want.F[i])
					}
				}
				one := b.Alloc(1, c.out).(*kernels.Host)
				for m := 0; m < n; m++ {
					xm := &kernels.Host{R: 1, C: c.in, F: x.F[m*c.in : (m+1)*c.in]}
					b.MatMul(one, xm, &wp, 1)
					for j, v := range one.F {
						if math.Float32bits(v) != math.Float32bits(got.F[m*c.out+j]) {
							t.Fatalf("row %d col %d: alone %v, in the batch %v", m, j, v, got.F[m*c.out+j])
						}
					}
				}
			})
		}
	}
}

// FuzzPanelKernels checks the panel kernels on random k, strides and
// ragged blocks.
func FuzzPanelKernels(f *testing.F) {
	f.Add(uint16(0), uint8(0), uint8(0), uint8(64), uint64(1))
	f.Add(uint16(33), uint8(3), uint8(1), uint8(17), uint64(2))
	f.Add(uint16(769), uint8(0), uint8(9), uint8(1), uint64(3))
	f.Fuzz(func(t *testing.T, k uint16, xpad, opad, rows uint8, seed uint64) {
		if len(panelKernelSet()) == 0 {
			t.Skip("no panel kernels on this CPU")
		}
		kk := int(k % 2049)
		r := rand.New(rand.NewPCG(seed, 9))
		panelCase(t, r, kk, kk+int(xpad%17), panelBlock+int(opad%17), int(rows%64)+1)
	})
}
