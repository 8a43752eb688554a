package cpu

import (
	"github.com/sluice-llm/sluice/kernels"
)

// This file holds the CPU backend's element-wise mixture-of-experts ops
// (kernels.ExpertOps); the expert matmuls are MatMul and MatMulExperts.

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
