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

// checkQ4KRows1 runs q4kRows1 on rows Q4_K rows of nb blocks and checks
// that it writes len(out) results only, each equal bit for bit to the
// one-row loop's and to the plain-Go dot product within float32 rounding.
func checkQ4KRows1(t *testing.T, data []byte, x []float32, rows, nb int) {
	t.Helper()
	in := nb * 256
	var a actQ
	a.quantize(kern{avx2: true}, x, in, 1, in, 256)
	got := make([]float32, rows+2)
	got[rows], got[rows+1] = 12345, -6789 // must stay
	q4kRows1(data, a.q, a.d, a.bs, nb, got[:rows])
	if got[rows] != 12345 || got[rows+1] != -6789 {
		t.Fatalf("%d rows × %d blocks: wrote past the rows", rows, nb)
	}
	rb := kernels.Q4_K.RowBytes(in)
	for o := 0; o < rows; o++ {
		var want float32
		dotQ4KRowsAVX2(&data[o*rb], &a.q[0], &a.d[0], &a.bs[0], nb, 1, &want)
		if math.Float32bits(got[o]) != math.Float32bits(want) {
			t.Fatalf("%d rows × %d blocks, row %d = %v, the one-row loop gives %v", rows, nb, o, got[o], want)
		}
		ref := dotQ4KGo(data[o*rb:(o+1)*rb], a.q, a.d, a.bs)
		// both sums round in float32 at most nb+16 additions deep (the
		// integer sub-block sums are exact), each error bounded by the
		// magnitude of the terms, not of the (possibly cancelled) result
		tol := max(1e-4*max(1, math.Abs(float64(ref))), float64(nb+16)*0x1p-23*magQ4K(data[o*rb:(o+1)*rb], a.q, a.d))
		if d := math.Abs(float64(got[o] - ref)); !(d <= tol) {
			t.Fatalf("%d rows × %d blocks, row %d = %v, plain Go %v", rows, nb, o, got[o], ref)
		}
	}
}

// magQ4K is the sum of the magnitudes of the float terms dotQ4KGo adds for
// one Q4_K row against quantized activations: per super-block |d·xd| times
// Σ sc·q·|x| and |dmin·xd| times Σ m·|x| (the scale and min parts are
// rounded apart, so a row whose parts cancel still carries their error).
func magQ4K(w []byte, xq []int8, xd []float32) float64 {
	var mag float64
	for b := range xd {
		blk := w[b*quant.Q4KBlockBytes : (b+1)*quant.Q4KBlockBytes]
		d := math.Abs(float64(xd[b] * quant.F16ToF32(binary.LittleEndian.Uint16(blk))))
		dmin := math.Abs(float64(xd[b] * quant.F16ToF32(binary.LittleEndian.Uint16(blk[2:]))))
		scales, qs := blk[4:16], blk[16:]
		xb := xq[b*256 : (b+1)*256]
		var l, m float64
		for g := 0; g < 4; g++ {
			sc1, m1 := scaleMinK4(2*g, scales)
			sc2, m2 := scaleMinK4(2*g+1, scales)
			for j := 0; j < 32; j++ {
				x1, x2 := math.Abs(float64(xb[64*g+j])), math.Abs(float64(xb[64*g+32+j]))
				l += float64(sc1)*float64(qs[32*g+j]&0xf)*x1 + float64(sc2)*float64(qs[32*g+j]>>4)*x2
				m += float64(m1)*x1 + float64(m2)*x2
			}
		}
		mag += d*l + dmin*m
	}
	return mag
}

// TestQ4KRows1 checks the two-stream Q4_K batch-1 loop for odd and even
// row counts (one row alone, a leftover row or none) and row lengths from
// one block to 8192 values, on random blocks and on blocks whose bytes are
// all 0xff (largest scales, mins and quants).
func TestQ4KRows1(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 45))
	for _, sat := range []bool{false, true} {
		for _, nb := range []int{1, 2, 3, 8, 32} {
			for _, rows := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 31, 64, 65, 97} {
				t.Run(fmt.Sprintf("sat=%v/%dx%d", sat, rows, nb), func(t *testing.T) {
					in := nb * 256
					data := randBlocks(r, kernels.Q4_K, rows, in)
					x := randF(r, in)
					if sat {
						saturateQ4K(data, x)
					}
					checkQ4KRows1(t, data, x, rows, nb)
				})
			}
		}
	}
}

// saturateQ4K sets every weight byte to 0xff but d and dmin (1.0: 0xffff
// is a NaN) and x to ±1, the integer sums' worst case.
func saturateQ4K(data []byte, x []float32) {
	for i := range data {
		data[i] = 0xff
	}
	for o := 0; o < len(data); o += 144 {
		data[o+1], data[o+3] = 0x3c, 0x3c
	}
	for i := range x {
		x[i] = float32(1 - 2*(i%2))
	}
}

// FuzzQ4KRows1 checks the two-stream loop on Q4_K rows made from the
// fuzzer's bytes (d and dmin kept finite), 1 to 100 rows of 1 to 12
// blocks.
func FuzzQ4KRows1(f *testing.F) {
	if !hasAVX2 {
		f.Skip("no AVX2 kernels on this machine or build")
	}
	f.Add(uint8(7), uint8(3), []byte{1, 2, 3})
	f.Add(uint8(98), uint8(11), []byte{0xff, 0x7b, 0, 0x80})
	f.Add(uint8(0), uint8(0), []byte{0x00, 0x3c})
	f.Fuzz(func(t *testing.T, rows8, nb8 uint8, seed []byte) {
		rows, nb := int(rows8%100)+1, int(nb8%12)+1
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(rows*nb)))
		data := randBlocks(r, kernels.Q4_K, rows, nb*256)
		for i, v := range seed {
			data[i%len(data)] ^= v
		}
		// d and dmin: finite halves of at most 1 in magnitude
		for o := 0; o < len(data); o += 144 {
			data[o+1] &= 0xbb
			data[o+3] &= 0xbb
		}
		checkQ4KRows1(t, data, randF(r, nb*256), rows, nb)
	})
}

// BenchmarkQ4KRowStreams compares the adjacent two-row Q4_K loop
// (krows_amd64.s, served before) with the two-stream loop (q4kRows1) on
// one thread, alternating them within each iteration so that both see the
// same load: weights in L2 (256 rows of 2048 values) and streamed from
// memory (streamBytes of rows, in chunks of 256 rows as the pool hands out
// a 2048-row matrix to two threads). GB/cpu-s counts weight bytes per
// CPU-second of each loop.
func BenchmarkQ4KRowStreams(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	const in, chunk = 2048, 256
	r := rand.New(rand.NewPCG(17, 46))
	var a actQ
	a.quantize(kern{avx2: true}, randF(r, in), in, 1, in, 256)
	nb := in / 256
	rb := kernels.Q4_K.RowBytes(in)
	loops := [2]func(w []byte, out []float32){
		func(w []byte, out []float32) {
			dotQ4KRows2AVX2(&w[0], &a.q[0], &a.d[0], &a.bs[0], nb, len(out), &out[0])
		},
		func(w []byte, out []float32) { q4kRows1(w, a.q, a.d, a.bs, nb, out) },
	}
	for _, place := range []struct {
		name string
		rows int
	}{{"L2", 256}, {"mem", streamBytes / rb}} {
		b.Run(place.name, func(b *testing.B) {
			rows := place.rows / chunk * chunk
			data := randBlocks(r, kernels.Q4_K, rows, in)
			out := make([]float32, rows)
			var cpu [2]float64
			for i := 0; i < b.N; i++ {
				for j := range loops {
					v := (i + j) % 2
					c0 := processCPU()
					for o := 0; o < rows; o += chunk {
						loops[v](data[o*rb:(o+chunk)*rb], out[o:o+chunk])
					}
					cpu[v] += (processCPU() - c0).Seconds()
				}
			}
			for v, name := range []string{"adjacent", "streams2"} {
				if cpu[v] > 0 {
					b.ReportMetric(float64(len(data))*float64(b.N)/cpu[v]/1e9, name+"-GB/cpu-s")
				}
			}
		})
	}
}
