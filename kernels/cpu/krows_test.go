package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// TestKRows2 checks the two-row Q4_K row loop against the one-row loop
// (bit for bit) and the plain-Go dot product (to float32 summation order;
// a NaN fails), on random blocks and on blocks whose bytes are all 0xff
// (largest scales, mins and quants: the integer sums' worst case), over
// row counts and row lengths from one block to a 8192-value row.
func TestKRows2(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	type rowLoop func(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32)
	for _, k := range []struct {
		dt       kernels.DType
		one, two rowLoop
		ref      func(w []byte, xq []int8, xd []float32, bs []int16) float32
	}{
		{kernels.Q4_K, dotQ4KRowsAVX2, dotQ4KRows2AVX2, dotQ4KGo},
	} {
		for _, c := range []struct {
			nb, rows  int
			saturated bool
		}{{1, 2, false}, {2, 4, false}, {8, 2, false}, {8, 64, false}, {32, 6, false}, {1, 2, true}, {8, 4, true}} {
			r := rand.New(rand.NewPCG(uint64(c.nb), uint64(c.rows)))
			in := c.nb * 256
			data := randBlocks(r, k.dt, c.rows, in)
			x := randF(r, in)
			if c.saturated {
				for i := range data {
					data[i] = 0xff
				}
				// finite d and dmin (0xffff is a NaN)
				rb := k.dt.RowBytes(in)
				for o := 0; o < len(data); o += rb / c.nb {
					data[o+1], data[o+3] = 0x3c, 0x3c
				}
				for i := range x {
					x[i] = float32(1 - 2*(i%2))
				}
			}
			var a actQ
			a.quantize(kern{avx2: true}, x, in, 1, in, 256)
			one := make([]float32, c.rows)
			two := make([]float32, c.rows)
			k.one(&data[0], &a.q[0], &a.d[0], &a.bs[0], c.nb, c.rows, &one[0])
			k.two(&data[0], &a.q[0], &a.d[0], &a.bs[0], c.nb, c.rows, &two[0])
			rb := k.dt.RowBytes(in)
			for o := range one {
				if math.Float32bits(one[o]) != math.Float32bits(two[o]) {
					t.Errorf("%v nb=%d rows=%d sat=%v row %d: two-row %v, one-row %v", k.dt, c.nb, c.rows, c.saturated, o, two[o], one[o])
				}
				want := k.ref(data[o*rb:(o+1)*rb], a.q, a.d, a.bs)
				if d := math.Abs(float64(two[o] - want)); !(d <= 1e-4*max(1, math.Abs(float64(want)))) {
					t.Errorf("%v nb=%d rows=%d sat=%v row %d: two-row %v, plain Go %v", k.dt, c.nb, c.rows, c.saturated, o, two[o], want)
				}
			}
		}
	}
}
