package kernels

// SiLUMulMatMuler is implemented by backends that run SwiGLU's product
// and the down projection that reads it as one pair of ops with nothing
// serial between them (the CPU backend: the product, computed on every
// thread, also lays the activations out as the F16/BF16 panel kernels
// read them, which MatMul did on the calling thread alone).
type SiLUMulMatMuler interface {
	// SiLUMulMatMul sets gate[:n] = silu(gate[:n])·up[:n], then out[:n] =
	// gate[:n]·wᵀ: the same values, bit for bit, as SiLUMul(gate, gate,
	// up, n) followed by MatMul(out, gate, w, n).
	SiLUMulMatMul(out, gate, up, w Tensor, n int)
}

// SiLUMulMatMul implements SiLUMulMatMuler with SiLUMul followed by
// MatMul.
func (r *Ref) SiLUMulMatMul(out, gate, up, w Tensor, n int) {
	r.SiLUMul(gate, gate, up, n)
	r.MatMul(out, gate, w, n)
}

var _ SiLUMulMatMuler = (*Ref)(nil)
