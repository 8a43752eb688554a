package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// checkQ6KRows1 runs q6kRows1 on rows Q6_K rows of nb blocks and checks
// that it writes len(out) results only, each equal bit for bit to the
// one-row loops' (register-scale and spilling) and to the plain-Go dot
// product within float32 rounding.
func checkQ6KRows1(t *testing.T, data []byte, x []float32, rows, nb int) {
	t.Helper()
	in := nb * 256
	var a actQ
	a.quantize(kern{avx2: true}, x, in, 1, in, 256)
	for _, vnni := range []bool{false, hasVNNI} {
		checkQ6KRows1With(t, vnni, data, &a, rows, nb)
	}
}

// checkQ6KRows1With is checkQ6KRows1 for one variant of q6kRows1 (AVX2 or
// AVX-512 VNNI).
func checkQ6KRows1With(t *testing.T, vnni bool, data []byte, a *actQ, rows, nb int) {
	t.Helper()
	in := nb * 256
	got := make([]float32, rows+2)
	got[rows], got[rows+1] = 12345, -6789 // must stay
	q6kRows1(vnni, data, a.q, a.d, a.bs, nb, got[:rows])
	if got[rows] != 12345 || got[rows+1] != -6789 {
		t.Fatalf("vnni=%v %d rows × %d blocks: wrote past the rows", vnni, rows, nb)
	}
	rb := kernels.Q6_K.RowBytes(in)
	for o := 0; o < rows; o++ {
		var reg, spill float32
		dotQ6KRowsRegAVX2(&data[o*rb], &a.q[0], &a.d[0], &a.bs[0], nb, 1, &reg)
		dotQ6KRowsAVX2(&data[o*rb], &a.q[0], &a.d[0], &a.bs[0], nb, 1, &spill)
		for _, want := range []float32{reg, spill} {
			if math.Float32bits(got[o]) != math.Float32bits(want) {
				t.Fatalf("vnni=%v %d rows × %d blocks, row %d = %v, the one-row loops give %v, %v", vnni, rows, nb, o, got[o], reg, spill)
			}
		}
		ref := dotQ6KGo(data[o*rb:(o+1)*rb], a.q, a.d, a.bs)
		if d := math.Abs(float64(got[o] - ref)); !(d <= magTol(kernels.Q6_K, data[o*rb:(o+1)*rb], a.q, a.d)) {
			t.Fatalf("vnni=%v %d rows × %d blocks, row %d = %v, plain Go %v", vnni, rows, nb, o, got[o], ref)
		}
	}
}

// TestQ6KRows1 checks the two-stream Q6_K batch-1 loop for odd and even
// row counts (one row alone, a leftover row or none) and row lengths from
// one block to 8192 values, on random blocks and saturated ones (every
// 6-bit value 63, scales 0x7f, 0x80 or 0xff, activations ±1 or −127).
func TestQ6KRows1(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	for _, sat := range []string{"", "ones", "max", "min"} {
		for _, nb := range []int{1, 2, 3, 8, 32} {
			for _, rows := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 31, 64, 65, 97} {
				t.Run(fmt.Sprintf("sat=%q/%dx%d", sat, rows, nb), func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(nb), uint64(rows)))
					data, x := q6Case(r, nb, rows, sat)
					checkQ6KRows1(t, data, x, rows, nb)
				})
			}
		}
	}
}

// TestQ6KRows1Allocs checks that the two-stream loop allocates nothing.
func TestQ6KRows1Allocs(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	const nb, rows = 8, 33
	r := rand.New(rand.NewPCG(3, 4))
	data, x := q6Case(r, nb, rows, "")
	var a actQ
	a.quantize(kern{avx2: true}, x, nb*256, 1, nb*256, 256)
	out := make([]float32, rows)
	for _, vnni := range []bool{false, hasVNNI} {
		if n := testing.AllocsPerRun(20, func() { q6kRows1(vnni, data, a.q, a.d, a.bs, nb, out) }); n != 0 {
			t.Fatalf("q6kRows1 (vnni=%v) allocates %v times per call", vnni, n)
		}
	}
}

// FuzzQ6KRows1 checks the two-stream loop on Q6_K rows made from the
// fuzzer's bytes (any values and scales; the float16 d kept finite), 1 to
// 100 rows of 1 to 12 blocks.
func FuzzQ6KRows1(f *testing.F) {
	if !hasAVX2 {
		f.Skip("no AVX2 kernels on this machine or build")
	}
	f.Add(uint8(7), uint8(3), []byte{1, 2, 3})
	f.Add(uint8(98), uint8(11), []byte{0xff, 0x7b, 0, 0x80})
	f.Add(uint8(0), uint8(0), []byte{0x00, 0x3c})
	f.Fuzz(func(t *testing.T, rows8, nb8 uint8, seed []byte) {
		rows, nb := int(rows8%100)+1, int(nb8%12)+1
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(rows*nb)))
		data := randBlocks(r, kernels.Q6_K, rows, nb*256)
		for i, v := range seed {
			if j := i % len(data); j%210 < 208 { // all but the float16 scale
				data[j] ^= v
			}
		}
		// every d a finite half of at most 1 in magnitude
		for o := 0; o < len(data); o += 210 {
			data[o+209] &= 0xbb
		}
		checkQ6KRows1(t, data, randF(r, nb*256), rows, nb)
	})
}

// BenchmarkQ6KRowStreams compares the one-stream register-scale Q6_K loop
// (q6rows_amd64.s, served before) with the two-stream loop (q6kRows1,
// "streams2" on AVX2, "streams2vnni" on AVX-512 VNNI where the machine has
// it) on
// one thread, alternating them within each iteration so that both see the
// same load: weights in L2 (256 rows of 2048 values) and streamed from
// memory (streamBytes of rows, in chunks of 256 rows as the pool hands out
// a 2048-row matrix to two threads). GB/cpu-s counts weight bytes per
// CPU-second of each loop.
func BenchmarkQ6KRowStreams(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	const in, chunk = 2048, 256
	r := rand.New(rand.NewPCG(17, 46))
	var a actQ
	a.quantize(kern{avx2: true}, randF(r, in), in, 1, in, 256)
	nb := in / 256
	rb := kernels.Q6_K.RowBytes(in)
	loops := [3]func(w []byte, out []float32){
		func(w []byte, out []float32) {
			dotQ6KRowsRegAVX2(&w[0], &a.q[0], &a.d[0], &a.bs[0], nb, len(out), &out[0])
		},
		func(w []byte, out []float32) { q6kRows1(false, w, a.q, a.d, a.bs, nb, out) },
		func(w []byte, out []float32) { q6kRows1(hasVNNI, w, a.q, a.d, a.bs, nb, out) },
	}
	for _, place := range []struct {
		name string
		rows int
	}{{"L2", 256}, {"mem", streamBytes / rb}} {
		b.Run(place.name, func(b *testing.B) {
			rows := place.rows / chunk * chunk
			data := randBlocks(r, kernels.Q6_K, rows, in)
			out := make([]float32, rows)
			var cpu [3]float64
			for i := 0; i < b.N; i++ {
				for j := range loops {
					v := (i + j) % 3
					c0 := processCPU()
					for o := 0; o < rows; o += chunk {
						loops[v](data[o*rb:(o+chunk)*rb], out[o:o+chunk])
					}
					cpu[v] += (processCPU() - c0).Seconds()
				}
			}
			for v, name := range []string{"reg", "streams2", "streams2vnni"} {
				if cpu[v] > 0 {
					b.ReportMetric(float64(len(data))*float64(b.N)/cpu[v]/1e9, name+"-GB/cpu-s")
				}
			}
		})
	}
}
