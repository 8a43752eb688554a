package cpu

// The backend's element-wise adds on rows: the AVX2 loops of vadd_amd64.s
// for the multiples of 8, the Go loop for the rest; the same float32
// operations in both, so the results are the same bit for bit.

// addRow sets x[i] += b[i] for i < len(x) (b at least as long).
func (k kern) addRow(x, b []float32) {
	i := 0
	if n8 := len(x) &^ 7; k.avx2 && n8 > 0 {
		_ = b[n8-1]
		addRowAVX2(&x[0], &b[0], n8)
		i = n8
	}
	for ; i < len(x); i++ {
		x[i] += b[i]
	}
}

// scaleAdd sets o[i] += w·x[i] for i < len(o) (x at least as long), the
// product rounded to float32 before the add.
func (k kern) scaleAdd(o, x []float32, w float32) {
	i := 0
	if n8 := len(o) &^ 7; k.avx2 && n8 > 0 {
		_ = x[n8-1]
		scaleAddAVX2(&o[0], &x[0], w, n8)
		i = n8
	}
	for ; i < len(o); i++ {
		o[i] += float32(w * x[i]) // rounded: no FMA at GOAMD64=v3 either
	}
}
