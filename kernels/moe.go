package kernels

import "math"

// ExpertOps is implemented by backends that run mixture-of-experts blocks
// and gpt-oss's attention (they also honour AttnShape.Window and Sinks).
// The model runs each active expert only on the rows routed to it: Gather
// those rows, MatMul with the expert's weights, the activation, MatMul, then
// ScatterAdd the rows back, weighted by the router.
type ExpertOps interface {
	// ScatterAdd adds w[i] times row i of x to row rows[i] of out, for
	// i < len(rows), in order (rows may repeat).
	ScatterAdd(out, x Tensor, rows []int32, w []float32)
	// ClampedSwiGLU sets out[:n] = g·sigmoid(alpha·g)·(u+1) with
	// g = min(gate, limit) and u = clamp(up, -limit, limit): gpt-oss's
	// expert activation. out may alias gate.
	ClampedSwiGLU(out, gate, up Tensor, n int, alpha, limit float32)
}

// ClampedSwiGLU is gpt-oss's gated activation of one element (see
// ExpertOps.ClampedSwiGLU).
func ClampedSwiGLU(g, u, alpha, limit float32) float32 {
	g = min(g, limit)
	u = min(max(u, -limit), limit)
	return g / (1 + float32(math.Exp(float64(-alpha*g)))) * (u + 1)
}

// ScatterAdd implements ExpertOps.
func (r *Ref) ScatterAdd(out, x Tensor, rows []int32, w []float32) {
	oh, xh := out.(*Host), x.(*Host)
	for i, dst := range rows {
		o, xr := oh.Row(int(dst)), xh.Row(i)
		for j := range o {
			o[j] += w[i] * xr[j]
		}
	}
}

// ClampedSwiGLU implements ExpertOps.
func (r *Ref) ClampedSwiGLU(out, gate, up Tensor, n int, alpha, limit float32) {
	oh, gh, uh := out.(*Host), gate.(*Host), up.(*Host)
	for i := 0; i < n*oh.C; i++ {
		oh.F[i] = ClampedSwiGLU(gh.F[i], uh.F[i], alpha, limit)
	}
}

var _ ExpertOps = (*Ref)(nil)
