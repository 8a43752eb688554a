package cpu

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// kern picks, per call, the AVX-512 kernel or its plain-Go twin. The Go
// versions are the fallback on other CPUs and in builds for other
// architectures; tests run both and compare them with the reference.
type kern struct {
	simd bool
	// vnni enables the AVX512_VNNI integer Q8_0 kernel.
	vnni bool
	// avx2 enables the AVX2 kernels on stored encodings (qdot_amd64.s).
	avx2 bool
	// k4v enables the AVX512_VNNI Q4_K tiles on repacked weights (k4v.go).
	k4v bool
	// q8z enables, with vnni, the Q8_0 tile of 4 weight rows × 16
	// activation rows in Z registers (q8z.go).
	q8z bool
}

// dot returns a·b[:len(a)].
func (k kern) dot(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s float32
	i := 0
	if k.simd && n >= 16 {
		i = n &^ 15
		s = dotAVX512(&a[0], &b[0], i)
	} else if k.avx2 && n >= 32 {
		i = n &^ 31
		s = dotAVX2(&a[0], &b[0], i)
	} else {
		var s0, s1, s2, s3 float32
		for ; i+4 <= n; i += 4 {
			s0 += a[i] * b[i]
			s1 += a[i+1] * b[i+1]
			s2 += a[i+2] * b[i+2]
			s3 += a[i+3] * b[i+3]
		}
		s = s0 + s1 + s2 + s3
	}
	for ; i < n; i++ {
		s += a[i] * b[i]
	}
	return s
}

// axpy sets y += a*x.
func (k kern) axpy(a float32, x, y []float32) {
	n := len(x)
	y = y[:n]
	i := 0
	if k.simd && n >= 16 {
		i = n &^ 15
		axpyAVX512(a, &x[0], &y[0], i)
	}
	for ; i < n; i++ {
		y[i] += a * x[i]
	}
}

// dot4x4 sets out[i*4+j] = x row i · w row j for 4 rows each, over the
// first n columns (rows are xs and ws floats apart).
func (k kern) dot4x4(x []float32, xs int, w []float32, ws int, n int, out *[16]float32) {
	i := 0
	if k.simd && n >= 16 {
		i = n &^ 15
		_ = x[3*xs+i-1]
		_ = w[3*ws+i-1]
		dot4x4AVX512(&x[0], xs, &w[0], ws, i, out)
	} else {
		*out = [16]float32{}
	}
	if i == n {
		return
	}
	for r := 0; r < 4; r++ {
		xr := x[r*xs+i : r*xs+n]
		for c := 0; c < 4; c++ {
			wr := w[c*ws+i : c*ws+n]
			var s float32
			for j, v := range xr {
				s += v * wr[j]
			}
			out[r*4+c] += s
		}
	}
}

// dot1x4 sets out[j] = x · w row j for 4 rows of w over n columns.
func (k kern) dot1x4(x []float32, w []float32, ws int, n int, out *[4]float32) {
	i := 0
	if k.simd && n >= 16 {
		i = n &^ 15
		_ = w[3*ws+i-1]
		dot1x4AVX512(&x[0], &w[0], ws, i, out)
	} else {
		*out = [4]float32{}
	}
	if i == n {
		return
	}
	xr := x[i:n]
	for c := 0; c < 4; c++ {
		wr := w[c*ws+i : c*ws+n]
		var s float32
		for j, v := range xr {
			s += v * wr[j]
		}
		out[c] += s
	}
}

// dotq8x4 sets out[j] = x · (Q8_0 row j of w) for 4 rows ws bytes apart,
// over n columns (a multiple of 32). sc, when not nil, holds the rows'
// decoded block scales (n/32 per row, ss floats apart).
func (k kern) dotq8x4(x []float32, w []byte, ws int, sc []float32, ss int, n int, out *[4]float32) {
	nb := n / kernels.Q8Block
	if nb == 0 {
		*out = [4]float32{}
		return
	}
	if k.simd && sc != nil {
		_ = x[n-1]
		_ = w[3*ws+nb*kernels.Q8BlockBytes-1]
		_ = sc[3*ss+nb-1]
		dotq8sx4AVX512(&x[0], &w[0], ws, &sc[0], ss, nb, out)
		return
	}
	if k.simd {
		_ = x[n-1]
		_ = w[3*ws+nb*kernels.Q8BlockBytes-1]
		dotq8x4AVX512(&x[0], &w[0], ws, nb, out)
		return
	}
	for c := 0; c < 4; c++ {
		out[c] = dotQ8Go(x[:n], w[c*ws:])
	}
}

// dotQ8Go is the plain dot product of x with one Q8_0 row.
func dotQ8Go(x []float32, q []byte) float32 {
	var s float32
	for b := 0; b < len(x)/kernels.Q8Block; b++ {
		blk := q[b*kernels.Q8BlockBytes : (b+1)*kernels.Q8BlockBytes]
		d := quant.F16ToF32(binary.LittleEndian.Uint16(blk))
		xb := x[b*kernels.Q8Block : (b+1)*kernels.Q8Block]
		var s0, s1 float32
		for j := 0; j < kernels.Q8Block; j += 2 {
			s0 += xb[j] * float32(int8(blk[2+j]))
			s1 += xb[j+1] * float32(int8(blk[3+j]))
		}
		s += d * (s0 + s1)
	}
	return s
}

// dequantRows decodes rows Q8_0 rows (ws bytes apart, n columns, n a
// multiple of 32) into dst (n floats per row).
func (k kern) dequantRows(dst []float32, w []byte, ws, rows, n int) {
	nb := n / kernels.Q8Block
	for r := 0; r < rows; r++ {
		d := dst[r*n : (r+1)*n]
		if k.simd && nb > 0 {
			_ = w[r*ws+nb*kernels.Q8BlockBytes-1]
			dequantQ8AVX512(&d[0], &w[r*ws], nb)
		} else {
			quant.DequantizeQ8_0(d, w[r*ws:])
		}
	}
}

// scores sets out[p] = q · k[p*stride:p*stride+len(q)] for p < len(out).
func (k kern) scores(q, kc []float32, stride int, out []float32) {
	hd, n := len(q), len(out)
	if n == 0 {
		return
	}
	_ = kc[(n-1)*stride+hd-1]
	if k.simd && hd%16 == 0 {
		n4 := n &^ 3
		if n4 > 0 {
			scores4AVX512(&q[0], &kc[0], stride, n4, hd, &out[0])
		}
		if n4 < n {
			scoresAVX512(&q[0], &kc[n4*stride], stride, n-n4, hd, &out[n4])
		}
		return
	}
	if k.avx2 && hd%8 == 0 {
		n4 := n &^ 3
		if n4 > 0 {
			scores4AVX2(&q[0], &kc[0], stride, n4, hd, &out[0])
		}
		if n4 < n {
			scores1AVX2(&q[0], &kc[n4*stride], stride, n-n4, hd, &out[n4])
		}
		return
	}
	for p := range out {
		out[p] = k.dot(q, kc[p*stride:p*stride+hd])
	}
}

// prefetchRows hints that n rows of the cache c (stride floats apart),
// hd floats each from float offset at, are read soon. The hint is into
// L2 (PREFETCHT1): on the Emerald Rapids VM a 4096-position decode's
// attention cost 18.2–18.9 CPU-ms per step that way against 20.4–20.6
// into L1 (BenchmarkAttentionDecode1B, alternated, load 4–5).
func (k kern) prefetchRows(c []float32, at, stride, n, hd int) {
	if !(k.simd || k.avx2) || n <= 0 || hd%16 != 0 {
		return
	}
	_ = c[at+(n-1)*stride+hd-1]
	prefetchRowsL2AVX512(uintptr(unsafe.Pointer(&c[at])), stride*4, n, hd*4)
}

// wsum adds sum_p w[p] * v[p*stride : p*stride+len(out)] to out.
func (k kern) wsum(w, v []float32, stride int, out []float32) {
	hd, n := len(out), len(w)
	if n == 0 {
		return
	}
	_ = v[(n-1)*stride+hd-1]
	if k.simd && hd%64 == 0 {
		wsum64AVX512(&w[0], &v[0], stride, n, hd, &out[0])
		return
	}
	if k.simd && hd%16 == 0 {
		wsumAVX512(&w[0], &v[0], stride, n, hd, &out[0])
		return
	}
	if k.avx2 && hd%64 == 0 {
		wsum64AVX2(&w[0], &v[0], stride, n, hd, &out[0])
		return
	}
	if k.avx2 && hd%32 == 0 {
		wsum32AVX2(&w[0], &v[0], stride, n, hd, &out[0])
		return
	}
	for p, wp := range w {
		k.axpy(wp, v[p*stride:p*stride+hd], out)
	}
}

// softmaxUnnorm sets x[i] = exp(x[i]*scale - max) and returns the sum of
// the new x: a softmax without its final division, which the caller
// applies where it is cheaper.
func (k kern) softmaxUnnorm(x []float32, scale float32) float32 {
	n16 := 0
	mx := float32(math.Inf(-1))
	if k.simd {
		n16 = len(x) &^ 15
		if n16 > 0 {
			mx = scaleMaxAVX512(&x[0], n16, scale)
		}
	} else if k.avx2 {
		n16 = len(x) &^ 7
		if n16 > 0 {
			mx = scaleMaxAVX2(&x[0], n16, scale)
		}
	}
	for i := n16; i < len(x); i++ {
		x[i] *= scale
		mx = max(mx, x[i])
	}
	var sum float32
	if n16 > 0 {
		if k.simd {
			sum = expSubSumAVX512(&x[0], n16, mx)
		} else {
			sum = expSubSumAVX2(&x[0], n16, mx)
		}
	}
	for i := n16; i < len(x); i++ {
		e := expf(x[i] - mx)
		x[i] = e
		sum += e
	}
	return sum
}

// scaleMul sets o[i] = (x[i]·s)·w[i] (RMSNorm's last step), 16 values at a
// time on AVX-512: the same two float32 products per value, bit-equal.
func (k kern) scaleMul(o, x, w []float32, s float32) {
	n16 := 0
	if k.simd {
		if n16 = len(o) &^ 15; n16 > 0 {
			_, _ = x[n16-1], w[n16-1]
			scaleMulAVX512(&o[0], &x[0], &w[0], n16, s)
		}
	}
	x, w = x[:len(o)], w[:len(o)]
	for j := n16; j < len(o); j++ {
		o[j] = (x[j] * s) * w[j]
	}
}

// siluMul sets o[i] = silu(g[i]) * u[i].
func (k kern) siluMul(o, g, u []float32) {
	n16 := 0
	if k.simd {
		n16 = len(o) &^ 15
		if n16 > 0 {
			_, _ = g[n16-1], u[n16-1]
			siluMulAVX512(&o[0], &g[0], &u[0], n16)
		}
	} else if k.avx2 {
		n16 = len(o) &^ 7
		if n16 > 0 {
			_, _ = g[n16-1], u[n16-1]
			siluMulAVX2(&o[0], &g[0], &u[0], n16)
		}
	}
	for i := n16; i < len(o); i++ {
		v := g[i]
		o[i] = v / (1 + expf(-v)) * u[i]
	}
}
