package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// halfRef64 returns x · an F16 or BF16 row in float64 and Σ|x·w|, the
// scale of a float32 sum's rounding error.
func halfRef64(dt kernels.DType, w []byte, x []float32) (dot, mag float64) {
	conv := quant.F16ToF32
	if dt == kernels.BF16 {
		conv = quant.BF16ToF32
	}
	for i, v := range x {
		p := float64(v) * float64(conv(binary.LittleEndian.Uint16(w[2*i:])))
		dot += p
		mag += math.Abs(p)
	}
	return dot, mag
}

// checkHalfRows1 runs halfRows1 on rows × k weights and checks every
// result against the float64 product and, bit for bit, against the
// one-row loop (which rowDot uses, so that MatMul and MatMulExperts agree).
func checkHalfRows1(t *testing.T, dt kernels.DType, data []byte, x []float32, rows, k int) {
	t.Helper()
	got := make([]float32, rows+1)
	got[rows] = 12345 // must stay: halfRows1 writes len(out) results only
	halfRows1(dt == kernels.BF16, data, x, k, got[:rows])
	if got[rows] != 12345 {
		t.Fatalf("%v %dx%d: wrote past the rows", dt, rows, k)
	}
	one := dotF16RowsAVX2
	if dt == kernels.BF16 {
		one = dotBF16RowsAVX2
	}
	for o := 0; o < rows; o++ {
		var want float32
		one(&data[o*2*k], &x[0], k, 1, &want)
		if math.Float32bits(got[o]) != math.Float32bits(want) {
			t.Fatalf("%v %dx%d row %d = %v, the one-row loop gives %v", dt, rows, k, o, got[o], want)
		}
		exact, mag := halfRef64(dt, data[o*2*k:], x)
		if d := math.Abs(float64(got[o]) - exact); d > 2e-6*mag+1e-6 {
			t.Fatalf("%v %dx%d row %d = %v, float64 product %v", dt, rows, k, o, got[o], exact)
		}
	}
}

// TestHalfRows1 checks the three-stream batch-1 loop for every row count
// modulo 3 (all rows left over, some, none) and row lengths from one
// 32-value step to gpt-oss's 2880.
func TestHalfRows1(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 43))
	for _, dt := range halfTypes {
		for _, k := range []int{32, 64, 96, 160, 2048, 2880} {
			for _, rows := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 31, 64, 65, 97} {
				t.Run(fmt.Sprintf("%v/%dx%d", dt, rows, k), func(t *testing.T) {
					data := randBlocks(r, dt, rows, k)
					sanitizeHalves(dt, data)
					checkHalfRows1(t, dt, data, randF(r, k), rows, k)
				})
			}
		}
	}
}

// FuzzHalfRows1 checks the three-stream loop on weights made from the
// fuzzer's bytes (any half values but NaN and infinity), 1 to 100 rows
// and 1 to 40 steps of 32 values.
func FuzzHalfRows1(f *testing.F) {
	if !hasAVX2 {
		f.Skip("no AVX2 kernels on this machine or build")
	}
	f.Add(false, uint8(7), uint8(3), []byte{1, 2, 3})
	f.Add(true, uint8(99), uint8(89), []byte{0xff, 0x7b, 0, 0x80})
	f.Add(false, uint8(2), uint8(0), []byte{0x00, 0x3c})
	f.Fuzz(func(t *testing.T, bf bool, rows8, steps8 uint8, seed []byte) {
		dt := kernels.F16
		if bf {
			dt = kernels.BF16
		}
		rows, k := int(rows8%100)+1, 32*(int(steps8%40)+1)
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(rows*k)))
		data := randBlocks(r, dt, rows, k)
		for i, v := range seed {
			data[i%len(data)] ^= v
		}
		sanitizeHalves(dt, data)
		checkHalfRows1(t, dt, data, randF(r, k), rows, k)
	})
}

// BenchmarkHalfRowLoops compares the one-row F16/BF16 loop of
// qdotgen_amd64.s with the three-stream loop (halfRows1) on one thread,
// alternating them within each iteration so that both see the same load:
// weights in L2 (60 rows of 2048 values, 240 KiB: the loops' arithmetic)
// and streamed from memory (streamBytes of rows, in chunks of 256 rows as
// the pool hands out a 2048-row matrix to two threads). GB/cpu-s counts
// weight bytes per CPU-second of each loop.
func BenchmarkHalfRowLoops(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	const in = 2048
	r := rand.New(rand.NewPCG(17, 44))
	x := randF(r, in)
	for _, dt := range halfTypes {
		bf := dt == kernels.BF16
		one := dotF16RowsAVX2
		if bf {
			one = dotBF16RowsAVX2
		}
		loops := [2]func(w []byte, out []float32){
			func(w []byte, out []float32) { one(&w[0], &x[0], in, len(out), &out[0]) },
			func(w []byte, out []float32) { halfRows1(bf, w, x, in, out) },
		}
		for _, place := range []struct {
			name        string
			rows, chunk int
		}{{"L2", 60, 60}, {"mem", streamBytes / (2 * in), 256}} {
			b.Run(dt.String()+"/"+place.name, func(b *testing.B) {
				rows := place.rows / place.chunk * place.chunk
				rb := 2 * in
				data := randBlocks(r, dt, rows, in)
				sanitizeHalves(dt, data)
				out := make([]float32, rows)
				var cpu [2]float64
				for i := 0; i < b.N; i++ {
					for j := range loops {
						v := (i + j) % 2
						c0 := processCPU()
						for o := 0; o < rows; o += place.chunk {
							loops[v](data[o*rb:(o+place.chunk)*rb], out[o:o+place.chunk])
						}
						cpu[v] += (processCPU() - c0).Seconds()
					}
				}
				for v, name := range []string{"rows1", "rows3"} {
					if cpu[v] > 0 {
						b.ReportMetric(float64(len(data))*float64(b.N)/cpu[v]/1e9, name+"-GB/cpu-s")
					}
				}
			})
		}
	}
}
