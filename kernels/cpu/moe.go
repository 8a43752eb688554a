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
		b.k.scaleAdd(o, xh.F[i*xh.C:i*xh.C+oh.C], w[i])
	}
}

// ClampedSwiGLU implements kernels.ExpertOps.
func (b *Backend) ClampedSwiGLU(out, gate, up kernels.Tensor, n int, alpha, limit float32) {
	oh, gh, uh := out.(*kernels.Host), gate.(*kernels.Host), up.(*kernels.Host)
	m := n * oh.C
	g, u, o := gh.F[:m], uh.F[:m], oh.F[:m]
	i := 0
	if n8 := m &^ 7; b.k.avx2 && n8 > 0 {
		// the same float32 operations eight at a time (swiglu_amd64.s):
		// the same results bit for bit
		clampedSwiGLUAVX2(&o[0], &g[0], &u[0], n8, alpha, limit)
		i = n8
	}
	clampedSwiGLUGo(o[i:], g[i:], u[i:], alpha, limit)
}

// clampedSwiGLUGo sets o[i] = min(g[i], limit) · sigmoid(alpha·min(g[i],
// limit)) · (min(max(u[i], −limit), limit) + 1), gpt-oss's activation;
// o may be g or u.
func clampedSwiGLUGo(o, g, u []float32, alpha, limit float32) {
	for i := range o {
		gv := min(g[i], limit)
		uv := min(max(u[i], -limit), limit)
		o[i] = gv / (1 + expf(-alpha*gv)) * (uv + 1)
	}
}
