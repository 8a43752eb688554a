package cpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// padVariants are the kernel sets TestPadRows forces on this machine: the
// default (VNNI tiles where present), the AVX2 tiles with AVX-512 on, and
// AVX2 alone (a machine without AVX-512).
func padVariants(b *Backend, v string) bool {
	switch v {
	case "novnni":
		if !b.k.vnni && !b.k.k4v {
			return false
		}
		b.k.vnni, b.k.k4v = false, false
	case "avx2":
		if !b.k.simd {
			return false
		}
		b.k.vnni, b.k.k4v, b.k.simd = false, false, false
	}
	return true
}

// TestPadRows checks MatMul on batches of 1–137 rows for every type with
// ×8 tiles, with each kernel variant: a batch padTo pads gives, bit for
// bit, the rows of the same batch extended with zero activation rows to a
// multiple of 8 (whole groups on the tiles); every batch is within the
// numeric contract of the float64 reference (checkPadRef); rows of
// saturated blocks (every activation ±amax) included; Q4_K repacked as
// at load (PrepareMatMul).
func TestPadRows(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(23, 5))
	const maxN = 137
	for _, c := range []struct {
		dt      kernels.DType
		out, in int
	}{
		{kernels.Q4_K, 21, 512}, {kernels.Q6_K, 19, 512}, {kernels.Q5_K, 13, 512},
		{kernels.Q8_0, 17, 256}, {kernels.Q4_0, 11, 256}, {kernels.Q4_K, 6, 2048},
	} {
		data := randBlocks(r, c.dt, c.out, c.in)
		x := randF(r, (maxN+8)*c.in)
		for m := 3; m < maxN; m += 7 {
			// saturated rows: every value ±1, so every q is ±127
			for j := range c.in {
				x[m*c.in+j] = float32(1 - 2*(j*7%3&1))
			}
		}
		w, err := kernels.NewHostWeight(c.dt, c.out, c.in, bytes.Clone(data))
		if err != nil {
			t.Fatal(err)
		}
		exact, onAct, bound, mag := storedRef(w, x, maxN)
		for _, v := range []string{"default", "novnni", "avx2"} {
			t.Run(fmt.Sprintf("%v/%dx%d/%s", c.dt, c.out, c.in, v), func(t *testing.T) {
				b := New(Options{Threads: 2, QuantizeActivations: true})
				defer b.Close()
				if !padVariants(b, v) {
					t.Skip("variant not on this machine")
				}
				wp, _ := kernels.NewHostWeight(c.dt, c.out, c.in, bytes.Clone(data))
				if err := b.PrepareMatMul(wp, false); err != nil {
					t.Fatal(err)
				}
				padded := 0
				for n := 1; n <= maxN; n++ {
					xh := &kernels.Host{R: n, C: c.in, F: x[:n*c.in]}
					got := b.Alloc(n, c.out).(*kernels.Host)
					b.MatMul(got, xh, wp, n)
					checkPadRef(t, c.dt, n, c.out, got.F, exact, onAct, bound, mag)
					np := b.padTo(wp, n)
					if np == n {
						continue
					}
					padded++
					xz := &kernels.Host{R: np, C: c.in, F: make([]float32, np*c.in)}
					copy(xz.F, x[:n*c.in])
					want := b.Alloc(np, c.out).(*kernels.Host)
					b.MatMul(want, xz, wp, np)
					for i := range got.F {
						if math.Float32bits(got.F[i]) != math.Float32bits(want.F[i]) {
							t.Fatalf("%d rows (padded to %d): out[%d,%d] = %v, the zero-extended batch gives %v", n, np, i/c.out, i%c.out, got.F[i], want.F[i])
						}
					}
				}
				if padded == 0 {
					t.Fatal("no batch was padded")
				}
			})
		}
	}
}

// checkPadRef checks n rows of a MatMul's output (out columns) against
// storedRef's reference for those rows (the reference's rows are out
// apart too): equal to float32 rounding on the quantized activations and
// within the activation-rounding bound of the exact product.
func checkPadRef(t *testing.T, dt kernels.DType, n, out int, got []float32, exact, onAct, bound, mag []float64) {
	t.Helper()
	for i, g := range got[:n*out] {
		tol := 2e-6*mag[i] + 1e-6
		if math.Abs(float64(g)-onAct[i]) > tol {
			t.Fatalf("%v %d rows [%d,%d]: got %v, want %v on the quantized activations (tol %g)", dt, n, i/out, i%out, g, onAct[i], tol)
		}
		if math.Abs(float64(g)-exact[i]) > bound[i]*1.0001+tol {
			t.Fatalf("%v %d rows [%d,%d]: got %v, exact %v: off by more than the bound %g", dt, n, i/out, i%out, g, exact[i], bound[i])
		}
	}
}

// TestPadRowsRule checks padTo's rule: which batches are padded, to what,
// for each type and with padMin's override.
func TestPadRowsRule(t *testing.T) {
	b := New(Options{Threads: 1, QuantizeActivations: true})
	defer b.Close()
	if !b.k.avx2 {
		t.Skip("no AVX2 kernels: nothing is padded")
	}
	w := func(dt kernels.DType, in int) *kernels.Host { return &kernels.Host{R: 8, C: in, DT: dt} }
	for _, c := range []struct {
		w      *kernels.Host
		padMin int
		n, np  int
	}{
		{w(kernels.Q4_K, 2048), 0, 1, 1},
		{w(kernels.Q4_K, 2048), 0, 3, 3},
		{w(kernels.Q4_K, 2048), 0, 4, 8},
		{w(kernels.Q4_K, 2048), 0, 8, 8},
		{w(kernels.Q4_K, 2048), 0, 9, 9},
		{w(kernels.Q4_K, 2048), 0, 15, 16},
		{w(kernels.Q4_K, 2048), 0, 131, 131},
		{w(kernels.Q4_K, 2048), 0, 132, 136},
		{w(kernels.Q6_K, 2048), 0, 12, 16},
		{w(kernels.Q5_K, 2048), 0, 12, 12},
		{w(kernels.Q5_K, 2048), 0, 13, 16},
		{w(kernels.Q8_0, 2048), 0, 4, 4},
		{w(kernels.Q8_0, 2048), 0, 7, 8},
		{w(kernels.Q4_0, 2048), 0, 23, 24},
		{w(kernels.Q4_0, 32), 0, 23, 24},
		{w(kernels.Q4_K, 128), 0, 15, 15}, // shorter than a super-block
		{w(kernels.F16, 2048), 0, 15, 15},
		{w(kernels.MXFP4, 2048), 0, 15, 15},
		{w(kernels.Q4_K, 2048), -1, 15, 15},
		{w(kernels.Q4_K, 2048), 1, 9, 16},
	} {
		b.padMin = c.padMin
		if got := b.padTo(c.w, c.n); got != c.np {
			t.Errorf("%v %d values, padMin %d: padTo(%d) = %d, want %d", c.w.DT, c.w.C, c.padMin, c.n, got, c.np)
		}
	}
}

// TestPadAllocs checks that a padded MatMul allocates nothing once the
// backend's buffers have grown.
func TestPadAllocs(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(3, 9))
	for _, dt := range []kernels.DType{kernels.Q4_K, kernels.Q6_K, kernels.Q5_K, kernels.Q8_0, kernels.Q4_0} {
		b := New(Options{Threads: 2, QuantizeActivations: true})
		w, _ := kernels.NewHostWeight(dt, 256, 512, randBlocks(r, dt, 256, 512))
		if err := b.PrepareMatMul(w, false); err != nil {
			t.Fatal(err)
		}
		const n = 15
		xs := [2]*kernels.Host{{R: n, C: 512, F: randF(r, n*512)}, {R: n, C: 512, F: randF(r, n*512)}}
		out := b.Alloc(n, 256)
		i := 0
		step := func() { b.MatMul(out, xs[i%2], w, n); i++ }
		step()
		step()
		if a := testing.AllocsPerRun(20, step); a != 0 {
			t.Errorf("%v: %v allocations per padded MatMul", dt, a)
		}
		b.Close()
	}
}
