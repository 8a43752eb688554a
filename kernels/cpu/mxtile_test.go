package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// TestMXFP4TabTiles checks the tiles with scale tables (mxtile_amd64.s)
// that batches of up to mxTabRows activation rows take: for every batch of
// 1 to 16 rows (tiles of 4, tiles of 2 and 3 left over, a single row left
// over through the table row loop), 33, 64 and mxTabRows rows (prefill) and ragged ranges of
// weight rows (odd counts, so that one weight row runs alone; more rows
// than a block of mxTabNc), each result equals the single-row kernel bit
// for bit and the Go twin to float32 rounding, and entries outside the
// range are not written.
func TestMXFP4TabTiles(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(20, 30))
	fast, plain := kern{avx2: true}, kern{}
	for _, nb := range []int{1, 3, 90} {
		in := nb * 32
		rb := kernels.MXFP4.RowBytes(in)
		for _, n := range tabBatches() {
			for _, rg := range []struct{ rows, lo, hi int }{{1, 0, 1}, {2, 0, 2}, {5, 0, 5}, {9, 1, 8}, {9, 2, 9}, {131, 3, 130}} {
				data := randMXFP4(r, rg.rows, in, 118, 18)
				x := randF(r, n*in)
				w := &kernels.Host{R: rg.rows, C: in, DT: kernels.MXFP4, Q: data}
				const sentinel = -7.5
				out := &kernels.Host{R: n, C: rg.rows, F: make([]float32, n*rg.rows)}
				for i := range out.F {
					out.F[i] = sentinel
				}
				task := qmatTask{k: fast, out: out, x: &kernels.Host{R: n, C: in, F: x}, w: w, n: n}
				task.act.quantize(fast, x, in, n, in, 32)
				task.act.mxfp4Corr(1, 1)
				if !task.act.mxsOK {
					t.Fatalf("n=%d: no scale tables", n)
				}
				task.run(rg.lo, rg.hi, 0)
				for m := 0; m < n; m++ {
					for o := 0; o < rg.rows; o++ {
						got := out.F[m*rg.rows+o]
						if o < rg.lo || o >= rg.hi {
							if got != sentinel {
								t.Errorf("nb=%d n=%d rows [%d,%d): out[%d,%d] written (%v)", nb, n, rg.lo, rg.hi, m, o, got)
							}
							continue
						}
						wr := data[o*rb : (o+1)*rb]
						xr := x[m*in : (m+1)*in]
						if f := fast.rowDot(kernels.MXFP4, wr, xr, &task.act, m); math.Float32bits(f) != math.Float32bits(got) {
							t.Errorf("nb=%d n=%d act %d row %d: table tile %v, row kernel %v", nb, n, m, o, got, f)
						}
						// the Go twin adds in another order: float32
						// rounding of the blocks' magnitudes
						p := plain.rowDot(kernels.MXFP4, wr, xr, &task.act, m)
						if d := math.Abs(float64(got - p)); d > 1e-5*mxMag(wr, &task.act, m) {
							t.Errorf("nb=%d n=%d act %d row %d: table tile %v, go %v", nb, n, m, o, got, p)
						}
					}
				}
			}
		}
	}
}

// tabBatches are the batch sizes TestMXFP4TabTiles checks.
func tabBatches() []int {
	ns := []int{33, 64, mxTabRows}
	for n := 1; n <= 16; n++ {
		ns = append(ns, n)
	}
	return ns
}

// mxMag is Σ |block scale · w_j · x_j| over the products of one MXFP4
// row and activation row m of a: the magnitude that bounds the float32
// rounding of any summation order.
func mxMag(w []byte, a *actQ, m int) float64 {
	nb := a.k / 32
	var s float64
	for b := 0; b < nb; b++ {
		blk := w[b*17 : (b+1)*17]
		xb := a.q[m*a.k+b*32 : m*a.k+(b+1)*32]
		var acc int64
		for j := 0; j < 16; j++ {
			acc += abs64(int64(fp4Int[blk[1+j]&0xf]) * int64(xb[j]))
			acc += abs64(int64(fp4Int[blk[1+j]>>4]) * int64(xb[j+16]))
		}
		s += math.Abs(float64(e8m0Half[blk[0]]) * float64(a.d[m*nb+b]) * float64(acc))
	}
	return s
}

// abs64 is |v|.
func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
