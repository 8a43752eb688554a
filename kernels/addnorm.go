package kernels

// AddNormer is implemented by backends that run a residual addition and
// the RMSNorm that reads its result as one op (the CPU backend: one
// parallel op over the rows, where the two were a serial addition and a
// norm).
type AddNormer interface {
	// AddRMSNorm sets x[:n] = x[:n] + r[:n], then out[:n] =
	// RMSNorm(x[:n])·w (each w.Cols()-long chunk normalized): the same
	// values, bit for bit, as Add(x, x, r, n) followed by RMSNorm(out, x,
	// w, n, eps). out may be r: each chunk of r is read before the same
	// chunk of out is written.
	AddRMSNorm(out, x, r, w Tensor, n int, eps float32)
}

// AddRMSNorm implements AddNormer with Add followed by RMSNorm.
func (r *Ref) AddRMSNorm(out, x, res, w Tensor, n int, eps float32) {
	r.Add(x, x, res, n)
	r.RMSNorm(out, x, w, n, eps)
}

var _ AddNormer = (*Ref)(nil)
