package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// TestRowsEach checks the 2–3-row path (the batch-1 row loop once per
// activation row, rowsEachBlock weight rows at a time) against rowDot,
// the plain loop it replaces, bit for bit: every block type with a row
// loop, weight-row ranges that start and end inside a block of
// rowsEachBlock, 1 to 3 super-blocks per row; and that it allocates
// nothing.
func TestRowsEach(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(20, 3))
	k := kern{avx2: true}
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K} {
		for _, c := range []struct{ n, rows, nb, lo, hi int }{
			{2, 150, 1, 0, 150}, {3, 150, 2, 7, 141}, {2, 64, 3, 0, 64}, {3, 200, 1, 63, 129}, {2, 5, 2, 1, 4},
		} {
			t.Run(fmt.Sprintf("%v/n=%d/%d-%d", dt, c.n, c.lo, c.hi), func(t *testing.T) {
				in := c.nb * 256
				w := &kernels.Host{R: c.rows, C: in, DT: dt, Q: randBlocks(r, dt, c.rows, in)}
				x := randF(r, c.n*in)
				out := &kernels.Host{R: c.n, C: c.rows, F: make([]float32, c.n*c.rows)}
				task := &qmatTask{k: k, w: w, out: out, x: &kernels.Host{R: c.n, C: in, F: x}, n: c.n}
				_, blk := quantized(dt)
				task.act.quantize(k, x, in, c.n, in, blk)
				if !task.rowsEach(c.lo, c.hi) {
					t.Fatalf("rowsEach refused %v", dt)
				}
				rb := dt.RowBytes(in)
				for m := range c.n {
					for o := range c.rows {
						got := out.F[m*c.rows+o]
						if o < c.lo || o >= c.hi {
							if got != 0 {
								t.Fatalf("row %d, weight row %d outside [%d, %d) written: %v", m, o, c.lo, c.hi, got)
							}
							continue
						}
						want := k.rowDot(dt, w.Q[o*rb:(o+1)*rb], x[m*in:(m+1)*in], &task.act, m)
						if math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("row %d, weight row %d: %v, rowDot %v", m, o, got, want)
						}
					}
				}
				if a := testing.AllocsPerRun(10, func() { task.rowsEach(c.lo, c.hi) }); a != 0 {
					t.Errorf("rowsEach allocates %v times per call", a)
				}
			})
		}
	}
	task := &qmatTask{k: k, w: &kernels.Host{R: 1, C: 32, DT: kernels.BF16}, n: 2}
	if task.rowsEach(0, 1) {
		t.Error("rowsEach took BF16, which has no quantized row loop")
	}
}
