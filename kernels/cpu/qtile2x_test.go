package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// tile8Ref computes every weight row of w against activation rows
// [0, n&^7) with the ×8 tile alone: the values the 2×4 tile must equal
// bit for bit.
func tile8Ref(w *kernels.Host, x []float32, n int) []float32 {
	K := w.C
	t := &qmatTask{k: kern{avx2: true}, x: &kernels.Host{R: n, C: K, F: x}, w: w, n: n}
	t.act.quantize(t.k, x, K, n, K, 256)
	ref := make([]float32, n*w.R)
	var acc [8]float32
	for m := 0; m+8 <= n; m += 8 {
		for o := 0; o < w.R; o++ {
			t.tile8(o, m, &acc)
			for r := 0; r < 8; r++ {
				ref[(m+r)*w.R+o] = acc[r]
			}
		}
	}
	return ref
}

// TestTile2x4 checks that the 2×4 Q4_K tile equals the ×8 tile bit for
// bit, called directly on every pair of weight rows and half of a group,
// and through MatMul (1 and 2 threads, odd and even weight-row counts,
// batches from 8 to 64; reductions of qPairMinK values or more in batches
// of qTileMinRows or more take the 2×4 tile there, the rest the ×8 tile),
// so that which tile a
// row meets never changes its value; saturated blocks (every nibble and
// scale 0xff, activations ±1) check the integer sums at their extremes.
func TestTile2x4(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	for _, c := range []struct {
		n, out, kb, threads int
		saturated           bool
	}{
		{8, 2, 1, 1, false}, {8, 7, 3, 1, false}, {16, 6, 8, 2, false}, {17, 9, 2, 2, false},
		{24, 33, 4, 2, false}, {64, 30, 8, 2, false}, {40, 5, 32, 1, false}, {16, 7, 16, 2, false}, {33, 12, 16, 2, false},
		{8, 4, 2, 1, true}, {16, 5, 8, 2, true}, {8, 6, 16, 1, true}, {32, 7, 16, 2, true},
	} {
		t.Run(fmt.Sprintf("n%d/%dx%d/t%d/sat=%v", c.n, c.out, c.kb*256, c.threads, c.saturated), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.n), uint64(c.out*c.kb)))
			in := c.kb * 256
			data := randBlocks(r, kernels.Q4_K, c.out, in)
			x := randF(r, c.n*in)
			if c.saturated {
				for i := range data {
					data[i] = 0xff
				}
				// finite d and dmin (0xffff is a NaN)
				for o := 0; o < len(data); o += 144 {
					data[o+1], data[o+3] = 0x3c, 0x3c
				}
				for i := range x {
					x[i] = float32(1 - 2*(i%2))
				}
			}
			check2x4(t, data, x, c.n, c.out, in, c.threads)
		})
	}
}

// check2x4 checks the 2×4 tile against the ×8 tile bit for bit on a Q4_K
// weight of out×in (data) and n activation rows x: direct calls on every
// pair of weight rows and half of a group of 8, and MatMul on threads
// threads.
func check2x4(t *testing.T, data []byte, x []float32, n, out, in, threads int) {
	t.Helper()
	w, err := kernels.NewHostWeight(kernels.Q4_K, out, in, data)
	if err != nil {
		t.Fatal(err)
	}
	ref := tile8Ref(w, x, n)
	n8 := n &^ 7

	// direct calls
	tk := &qmatTask{k: kern{avx2: true}, x: &kernels.Host{R: n, C: in, F: x}, w: w, n: n}
	tk.act.quantize(tk.k, x, in, n, in, 256)
	var acc [8]float32
	for m := 0; m < n8; m += 8 {
		for h := 0; h < 8; h += 4 {
			for o := 0; o+1 < out; o += 2 {
				tk.tile2x4(o, m, h, &acc)
				for r := 0; r < 4; r++ {
					for p := 0; p < 2; p++ {
						got, want := acc[4*p+r], ref[(m+h+r)*out+o+p]
						if math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("tile2x4 row %d, activation row %d: %v, ×8 tile %v", o+p, m+h+r, got, want)
						}
					}
				}
			}
		}
	}

	// through MatMul
	b := New(Options{Threads: threads, QuantizeActivations: true})
	defer b.Close()
	got := b.Alloc(n, out).(*kernels.Host)
	b.MatMul(got, &kernels.Host{R: n, C: in, F: x}, w, n)
	for i, want := range ref[:n8*out] {
		if g := got.F[i]; math.Float32bits(g) != math.Float32bits(want) {
			t.Fatalf("MatMul [%d,%d]: %v, ×8 tile %v", i/out, i%out, g, want)
		}
	}
}

// FuzzTile2x4 checks the 2×4 tile against the ×8 tile bit for bit on
// weight blocks made from the fuzzer's bytes (scales, mins and d
// included), batches of 8 to 71 rows and reductions of 1 to 20
// super-blocks.
func FuzzTile2x4(f *testing.F) {
	f.Add(uint8(0), uint8(3), uint8(0), []byte{1, 2, 3})
	f.Add(uint8(24), uint8(7), uint8(15), []byte{0xff, 0x7b, 0, 0x80})
	f.Add(uint8(63), uint8(1), uint8(19), []byte{0x00, 0x3c})
	f.Fuzz(func(t *testing.T, n8, rows8, kb8 uint8, seed []byte) {
		if !hasAVX2 {
			t.Skip("no AVX2 kernels on this machine or build")
		}
		n, rows, in := int(n8%64)+8, int(rows8%9)+1, (int(kb8%20)+1)*256
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(n8)))
		data := randBlocks(r, kernels.Q4_K, rows, in)
		for i, v := range seed {
			data[i%len(data)] ^= v
		}
		sanitizeHalves(kernels.Q4_K, data)
		check2x4(t, data, randF(r, n*in), n, rows, in, 2)
	})
}
