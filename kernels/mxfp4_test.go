package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/quant"
)

// randMXFP4 returns a random rows×cols MXFP4 matrix (ggml layout) with
// scales around 1.
func randMXFP4(r *rand.Rand, rows, cols int) []byte {
	w := make([]byte, rows*quant.MXFP4RowBytes(cols))
	for i := range w {
		w[i] = byte(r.IntN(256))
	}
	for b := 0; b < len(w); b += quant.MXFP4BlockBytes {
		w[b] = byte(120 + r.IntN(14))
	}
	return w
}

// TestMatVecMXFP4 checks the MXFP4 matvec against a float64 dot product of
// the decoded weights (quant.DequantizeMXFP4) on small and real shapes
// (gpt-oss-20b's hidden size is 2880).
func TestMatVecMXFP4(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, sh := range []struct{ rows, cols int }{{1, 32}, {7, 96}, {64, 64}, {3, 2880}} {
		t.Run(fmt.Sprintf("%dx%d", sh.rows, sh.cols), func(t *testing.T) {
			w := randMXFP4(r, sh.rows, sh.cols)
			x := make([]float32, sh.cols)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			out := make([]float32, sh.rows)
			MatVecMXFP4(out, x, w, sh.rows, sh.cols)
			row := make([]float32, sh.cols)
			rb := MXFP4.RowBytes(sh.cols)
			for o := 0; o < sh.rows; o++ {
				quant.DequantizeMXFP4(row, w[o*rb:(o+1)*rb])
				var want, mag float64
				for i, v := range row {
					want += float64(x[i]) * float64(v)
					mag += math.Abs(float64(x[i]) * float64(v))
				}
				if d := math.Abs(float64(out[o]) - want); d > 1e-5*mag+1e-6 {
					t.Errorf("row %d: %v, want %v (|x||w| %v)", o, out[o], want, mag)
				}
			}
		})
	}
	if MXFP4.String() != "MXFP4" || MXFP4.RowBytes(64) != 34 {
		t.Errorf("MXFP4: %s, %d bytes per 64", MXFP4, MXFP4.RowBytes(64))
	}
}

// BenchmarkMatVecMXFP4 measures the plain-Go reference on one gpt-oss-20b
// expert projection (2880×2880), reporting weight bytes read per second.
//
//	go test -run XXX -bench MatVecMXFP4 ./kernels/
func BenchmarkMatVecMXFP4(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	const rows, cols = 2880, 2880
	w := randMXFP4(r, rows, cols)
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	out := make([]float32, rows)
	b.SetBytes(int64(len(w)))
	b.ReportAllocs()
	for b.Loop() {
		MatVecMXFP4(out, x, w, rows, cols)
	}
}
