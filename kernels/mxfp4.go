package kernels

import "github.com/sluice-llm/sluice/quant"

// MXFP4 is OCP microscaling FP4 in ggml's block layout (GGUF type 39):
// blocks of 32 E2M1 values with one E8M0 scale, 17 bytes (see
// quant.DequantizeMXFP4). gpt-oss stores its expert weights this way. Its
// value is ggml's type id rather than the next iota, so that DTypes added
// to the list in kernels.go cannot collide with it.
const MXFP4 DType = quant.GGMLTypeMXFP4

// fp4Half are the E2M1 code points doubled (ggml's kvalues_mxfp4): integers,
// so a block's dot product sums exact products before one scaling.
var fp4Half = [16]float32{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// DotMXFP4 returns the dot product of x with one ggml-layout MXFP4 row q of
// len(x) values (a multiple of 32).
func DotMXFP4(x []float32, q []byte) float32 {
	var s float32
	for b := 0; b < len(x)/quant.MXFP4Block; b++ {
		blk := q[b*quant.MXFP4BlockBytes : (b+1)*quant.MXFP4BlockBytes]
		xb := x[b*quant.MXFP4Block : (b+1)*quant.MXFP4Block]
		var bs float32
		for j := 0; j < 16; j++ {
			bs += xb[j]*fp4Half[blk[1+j]&0xF] + xb[j+16]*fp4Half[blk[1+j]>>4]
		}
		s += bs * (quant.E8M0ToF32(blk[0]) / 2)
	}
	return s
}

// MatVecMXFP4 sets out[r] = x · w[r] for the rows×cols MXFP4 matrix w
// (ggml layout, rows of cols/32 blocks), as nn.Linear stores [out × in].
// It is the plain reference that fast MXFP4 kernels are checked against.
func MatVecMXFP4(out, x []float32, w []byte, rows, cols int) {
	rb := quant.MXFP4RowBytes(cols)
	for r := 0; r < rows; r++ {
		out[r] = DotMXFP4(x[:cols], w[r*rb:(r+1)*rb])
	}
}
