package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// TestBatchMatMul checks the batched paths (the ×4 tiles in cache blocks,
// the F16/BF16 4×2 tile, and the rows left over) of every stored format
// against the float64 reference, for batches of 2 to 64 rows, with rows
// that cross blocks of weight rows and reductions of 1 to 17 k-quant
// blocks.
func TestBatchMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 21))
	for _, dt := range storedTypes {
		for _, c := range []struct{ n, out, kb int }{
			{2, 5, 1}, {3, 7, 2}, {4, 9, 1}, {5, 37, 9}, {7, 16, 3}, {8, 40, 8}, {16, 33, 2}, {17, 12, 17}, {33, 21, 4}, {64, 19, 9},
		} {
			in := c.kb * 256
			t.Run(fmt.Sprintf("%v/n%d/%dx%d", dt, c.n, c.out, in), func(t *testing.T) {
				checkStored(t, dt, randBlocks(r, dt, c.out, in), randF(r, c.n*in), c.n, c.out, in, 2)
			})
		}
	}
}

// FuzzBatchMatMul checks the batched paths of every stored format on
// weight blocks made from the fuzzer's bytes, with batches of 2 to 65 rows
// and reductions of 1 to 10 k-quant blocks (64 to 640 values for F16 and
// BF16).
func FuzzBatchMatMul(f *testing.F) {
	f.Add(uint8(3), uint8(14), uint8(3), uint8(8), []byte{1, 2, 3})
	f.Add(uint8(4), uint8(2), uint8(5), uint8(9), []byte{0xff, 0x7b, 0, 0x80})
	f.Add(uint8(6), uint8(63), uint8(1), uint8(0), []byte{0x00, 0x3c})
	f.Fuzz(func(t *testing.T, ti, n8, rows8, kb8 uint8, seed []byte) {
		dt := storedTypes[int(ti)%len(storedTypes)]
		n, rows, in := int(n8%64)+2, int(rows8%9)+1, (int(kb8%10)+1)*256
		if dt.BlockValues() == 1 {
			// long float32 sums of same-signed products outgrow
			// checkStored's tolerance
			in = (int(kb8%10) + 1) * 64
		}
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(ti)))
		data := randBlocks(r, dt, rows, in)
		for i, v := range seed {
			data[i%len(data)] ^= v
		}
		sanitizeHalves(dt, data)
		checkStored(t, dt, data, randF(r, n*in), n, rows, in, 2)
	})
}

// TestBatchTileSizes checks every batch size from 1 to 64 on every
// block-quantized format, so that each split of the rows into ×8 tiles,
// ×4 tiles and single rows is met (TestBatchMatMul crosses blocks of
// weight rows and longer reductions).
func TestBatchTileSizes(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 64))
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K} {
		const out, in = 29, 256
		data := randBlocks(r, dt, out, in)
		for n := 1; n <= 64; n++ {
			t.Run(fmt.Sprintf("%v/n%d", dt, n), func(t *testing.T) {
				checkStored(t, dt, data, randF(r, n*in), n, out, in, 2)
			})
		}
	}
}
