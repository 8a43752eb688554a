package cpu

import (
	"encoding/binary"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// Q8_0 × Q8_0 dot products for small batches (decode).
//
// As llama.cpp does, an activation row that meets Q8_0 weights is quantized
// to int8 in blocks of 32 with one scale per block (q = round(x·127/amax),
// d = float16(amax/127), as ggml's quantize_row_q8_0: see actBlock), and
// the products are integer dot products scaled by d_x·d_w. The weights
// stay int8 in memory. The activation rounding adds an error of at most
// d_x/2 + 127·|d_x − amax/127| ≤ 0.57·d_x per element (the second term from
// the float16 scale), so per block |error| ≤ 0.57·d_x · Σ|w_j|; relative to
// the result it is typically below 0.5 %. Options.QuantizeActivations turns
// this on.

// quantizeQ8Act quantizes x (a multiple of 32 long) into q and per-block
// scales d (len(x)/32) as ggml's quantize_row_q8_0 does (see actBlock).
func quantizeQ8Act(x []float32, q []int8, d []float32) {
	for b := 0; b < len(x)/kernels.Q8Block; b++ {
		d[b] = actBlock(x[b*kernels.Q8Block:(b+1)*kernels.Q8Block], q[b*kernels.Q8Block:(b+1)*kernels.Q8Block])
	}
}

// dotq8q8x4 sets out[j] = (xq, xd) · (Q8_0 row j of w) for 4 rows ws bytes
// apart over nb blocks; sc holds the rows' decoded block scales (ss floats
// apart).
func (k kern) dotq8q8x4(xq []int8, xd []float32, w []byte, ws int, sc []float32, ss int, nb int, out *[4]float32) {
	if nb == 0 {
		*out = [4]float32{}
		return
	}
	if k.vnni {
		_ = xq[nb*kernels.Q8Block-1]
		_ = xd[nb-1]
		_ = w[3*ws+nb*kernels.Q8BlockBytes-1]
		_ = sc[3*ss+nb-1]
		dotq8q8x4AVX512(&xq[0], &xd[0], &w[0], ws, &sc[0], ss, nb, out)
		return
	}
	for c := 0; c < 4; c++ {
		out[c] = dotQ8Q8Go(xq, xd, w[c*ws:], nb)
	}
}

// dotQ8Q8Go is the plain twin of the integer kernel for one row, summed in
// ggml's order (see lanes8).
func dotQ8Q8Go(xq []int8, xd []float32, q []byte, nb int) float32 {
	var acc lanes8
	for b := 0; b < nb; b++ {
		blk := q[b*kernels.Q8BlockBytes : (b+1)*kernels.Q8BlockBytes]
		d := quant.F16ToF32(binary.LittleEndian.Uint16(blk)) * xd[b]
		xb := xq[b*kernels.Q8Block : (b+1)*kernels.Q8Block]
		var l [8]int32
		for j, v := range xb {
			l[j/4] += int32(v) * int32(int8(blk[2+j]))
		}
		acc.add(d, &l)
	}
	return acc.sum()
}
