package cpu

import (
	"github.com/sluice-llm/sluice/kernels"
)

// This file holds the CPU backend's mixture-of-experts ops (kernels.ExpertOps)
// and a plain MXFP4 MatMul (each weight row decoded through
// kernels.DotMXFP4, split over the pool by output rows).

// ScatterAdd implements kernels.ExpertOps.
func (b *Backend) ScatterAdd(out, x kernels.Tensor, rows []int32, w []float32) {
	oh, xh := out.(*kernels.Host), x.(*kernels.Host)
	for i, dst := range rows {
		o := oh.F[int(dst)*oh.C : (int(dst)+1)*oh.C]
		xr := xh.F[i*xh.C : i*xh.C+oh.C]
		wi := w[i]
		for j, v := range xr {
			o[j] += wi * v
		}
	}
}

// ClampedSwiGLU implements kernels.ExpertOps.
func (b *Backend) ClampedSwiGLU(out, gate, up kernels.Tensor, n int, alpha, limit float32) {
	oh, gh, uh := out.(*kernels.Host), gate.(*kernels.Host), up.(*kernels.Host)
	m := n * oh.C
	g, u, o := gh.F[:m], uh.F[:m], oh.F[:m]
	for i := range o {
		gv := min(g[i], limit)
		uv := min(max(u[i], -limit), limit)
		o[i] = gv / (1 + expf(-alpha*gv)) * (uv + 1)
	}
}

// mxfp4Task computes out[:n] = x[:n]·wᵀ for an MXFP4 w over a range of
// output rows.
type mxfp4Task struct {
	out, x, w *kernels.Host
	n         int
}

func (t *mxfp4Task) run(lo, hi, _ int) {
	K := t.w.C
	rb := t.w.DT.RowBytes(K)
	for o := lo; o < hi; o++ {
		wr := t.w.Q[o*rb : (o+1)*rb]
		for m := 0; m < t.n; m++ {
			t.out.F[m*t.out.C+o] = kernels.DotMXFP4(t.x.F[m*t.x.C:m*t.x.C+K], wr)
		}
	}
}

// matmulMXFP4 is MatMul for an MXFP4 weight.
func (b *Backend) matmulMXFP4(out, x, w *kernels.Host, n int) {
	t := &b.mx
	t.out, t.x, t.w, t.n = out, x, w, n
	if n*w.R*w.C < 1<<15 {
		t.run(0, w.R, 0)
	} else {
		b.pool.parallel(w.R, 16, 0, t)
	}
	t.out, t.x, t.w = nil, nil, nil
}
