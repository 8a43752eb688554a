package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// TestExpertOpsAgainstRef checks the CPU backend's ScatterAdd,
// ClampedSwiGLU and MXFP4 MatMul (one row, and enough work to be split over
// the pool) against the reference backend's.
func TestExpertOpsAgainstRef(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	ref, b := kernels.NewRef(), New(Options{Threads: 2})
	defer b.Close()
	type ops interface {
		kernels.Backend
		kernels.ExpertOps
	}
	fill := func(be kernels.Backend, rows, cols int, src []float32) kernels.Tensor {
		t := be.Alloc(rows, cols)
		copy(be.ToHost(t, rows), src)
		return t
	}
	for _, c := range []struct{ n, rows, cols int }{{1, 8, 64}, {3, 40, 96}, {17, 300, 256}} {
		w := randF(r, c.rows*c.cols)
		var wq []byte
		for o := 0; o < c.rows; o++ {
			wq = append(wq, quant.QuantizeMXFP4(w[o*c.cols:(o+1)*c.cols])...)
		}
		x, g, u, y := randF(r, c.n*c.cols), randF(r, c.n*c.rows), randF(r, c.n*c.rows), randF(r, c.n*c.rows)
		for i := range g {
			g[i] *= 10
			u[i] *= 10
		}
		dst := make([]int32, c.n)
		sw := randF(r, c.n)
		for i := range dst {
			dst[i] = int32(r.IntN(c.n))
		}
		run := func(be ops) (mm, act, sc []float32) {
			wt, err := be.Weight(kernels.MXFP4, c.rows, c.cols, wq)
			if err != nil {
				t.Fatal(err)
			}
			o := be.Alloc(c.n, c.rows)
			be.MatMul(o, fill(be, c.n, c.cols, x), wt, c.n)
			gt := fill(be, c.n, c.rows, g)
			be.ClampedSwiGLU(gt, gt, fill(be, c.n, c.rows, u), c.n, 1.702, 7)
			acc := fill(be, c.n, c.rows, y)
			be.ScatterAdd(acc, gt, dst, sw)
			return append([]float32(nil), be.ToHost(o, c.n)...), append([]float32(nil), be.ToHost(gt, c.n)...), be.ToHost(acc, c.n)
		}
		wm, wa, ws := run(ref)
		gm, ga, gs := run(b)
		for _, p := range []struct {
			name      string
			got, want []float32
			tol       float32
		}{{"matmul", gm, wm, 1e-4}, {"clamped swiglu", ga, wa, 1e-5}, {"scatter add", gs, ws, 1e-5}} {
			for i := range p.want {
				if !close32(p.got[i], p.want[i], p.tol) {
					t.Fatalf("%v %s [%d]: got %v want %v", c, p.name, i, p.got[i], p.want[i])
				}
			}
		}
	}
}
