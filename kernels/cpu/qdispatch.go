package cpu

import "github.com/sluice-llm/sluice/kernels"

// Per-row kernels on stored encodings: the AVX2 row loops of
// qdotgen_amd64.s called for one row where k.avx2 is set, else the
// plain-Go twins of qmat.go.

// dotHalf returns x · one F16 or BF16 row.
func (k kern) dotHalf(dt kernels.DType, w []byte, x []float32) float32 {
	n := len(x)
	w = w[:2*n]
	i := 0
	var s float32
	if k.avx2 && n >= 32 {
		i = n &^ 31
		if dt == kernels.F16 {
			dotF16RowsAVX2(&w[0], &x[0], i, 1, &s)
		} else {
			dotBF16RowsAVX2(&w[0], &x[0], i, 1, &s)
		}
	}
	if i < n {
		s += dotHalfGo(dt, w[2*i:], x[i:])
	}
	return s
}

// dotQ8_0 returns the Q8 activations · one Q8_0 row.
func (k kern) dotQ8_0(w []byte, xq []int8, xd []float32) float32 {
	nb := len(xd)
	if k.avx2 && nb > 0 {
		_ = w[nb*kernels.Q8BlockBytes-1]
		_ = xq[nb*32-1]
		var s float32
		dotQ8_0RowsAVX2(&w[0], &xq[0], &xd[0], nb, 1, &s)
		return s
	}
	return dotQ8Q8Go(xq, xd, w, nb)
}

// dotQ4_0 returns the Q8 activations · one Q4_0 row.
func (k kern) dotQ4_0(w []byte, xq []int8, xd []float32) float32 {
	nb := len(xd)
	if k.avx2 && nb > 0 {
		_ = w[nb*18-1]
		_ = xq[nb*32-1]
		return dotQ4_0AVX2(&w[0], &xq[0], &xd[0], nb)
	}
	return dotQ4_0Go(w, xq, xd)
}

// dotQ4K returns the Q8_K activations · one Q4_K row.
func (k kern) dotQ4K(w []byte, xq []int8, xd []float32, bs []int16) float32 {
	nb := len(xd)
	if k.avx2 && nb > 0 {
		_ = w[nb*144-1]
		_ = xq[nb*256-1]
		_ = bs[nb*16-1]
		var s float32
		dotQ4KRowsAVX2(&w[0], &xq[0], &xd[0], &bs[0], nb, 1, &s)
		return s
	}
	return dotQ4KGo(w, xq, xd, bs)
}

// dotQ5K returns the Q8_K activations · one Q5_K row (on AVX-512 VNNI
// with dotQ5KRowsVNNI, bit-equal to the AVX2 loop).
func (k kern) dotQ5K(w []byte, xq []int8, xd []float32, bs []int16) float32 {
	nb := len(xd)
	if k.avx2 && nb > 0 {
		_ = w[nb*176-1]
		_ = xq[nb*256-1]
		_ = bs[nb*16-1]
		var s float32
		if k.vnni {
			dotQ5KRowsVNNI(&w[0], &xq[0], &xd[0], &bs[0], nb, 1, &s)
		} else {
			dotQ5KRowsPfAVX2(&w[0], &xq[0], &xd[0], &bs[0], nb, 1, &s)
		}
		return s
	}
	return dotQ5KGo(w, xq, xd, bs)
}

// dotQ6K returns the Q8_K activations · one Q6_K row (on AVX-512 VNNI
// with dotQ6KRowsVNNI, bit-equal to the AVX2 loop).
func (k kern) dotQ6K(w []byte, xq []int8, xd []float32, bs []int16) float32 {
	nb := len(xd)
	if k.avx2 && nb > 0 {
		_ = w[nb*210-1]
		_ = xq[nb*256-1]
		_ = bs[nb*16-1]
		var s float32
		if k.vnni {
			dotQ6KRowsVNNI(&w[0], &xq[0], &xd[0], &bs[0], nb, 1, &s)
		} else {
			dotQ6KRowsRegAVX2(&w[0], &xq[0], &xd[0], &bs[0], nb, 1, &s)
		}
		return s
	}
	return dotQ6KGo(w, xq, xd, bs)
}
