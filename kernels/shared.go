package kernels

// SharedMatMuler is implemented by backends that run several products of
// one input as one op (the CPU backend: one parallel op whose activations
// are quantized once), such as a layer's q, k and v projections or its
// gate and up projections.
type SharedMatMuler interface {
	// MatMulShared sets outs[i][:n] = x[:n] · ws[i]ᵀ for every i <
	// len(ws): the same values, bit for bit, as len(ws) MatMul calls.
	// len(outs) is len(ws), and every ws[i] has as many columns as x.
	MatMulShared(outs []Tensor, x Tensor, ws []Tensor, n int)
}

// MatMulShared implements SharedMatMuler with one MatMul per weight.
func (r *Ref) MatMulShared(outs []Tensor, x Tensor, ws []Tensor, n int) {
	for i, w := range ws {
		r.MatMul(outs[i], x, w, n)
	}
}

var _ SharedMatMuler = (*Ref)(nil)
