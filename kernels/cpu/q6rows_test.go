package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// rowLoopFn is the signature of the k-quant batch-1 row loops.
type rowLoopFn func(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32)

// q6Case fills Q6_K weight rows and an activation row for one test case:
// random blocks, or saturated ones (every 6-bit value 63 with every scale
// at the given byte, d = 1) against activations of ±1 or ±127 (the integer
// sums' worst cases).
func q6Case(r *rand.Rand, nb, rows int, sat string) (data []byte, x []float32) {
	in := nb * 256
	data = randBlocks(r, kernels.Q6_K, rows, in)
	x = randF(r, in)
	if sat == "" {
		return data, x
	}
	for o := 0; o < len(data); o += 210 {
		for i := 0; i < 192; i++ {
			data[o+i] = 0xff
		}
		for i := 192; i < 208; i++ {
			data[o+i] = map[string]byte{"max": 0x7f, "min": 0x80, "ones": 0xff}[sat]
		}
		data[o+208], data[o+209] = 0x00, 0x3c
	}
	for i := range x {
		x[i] = float32(1 - 2*(i%2))
		if sat != "ones" {
			// a constant sign keeps every 16-value sum at ±2032
			x[i] = -127
		}
	}
	return data, x
}

// TestQ6KRowsReg checks the register-scale Q6_K row loop
// (q6rows_amd64.s) against the spilling loop of qdotgen_amd64.s (bit for
// bit) and the plain-Go dot product (to float32 summation order; a NaN
// fails), on random blocks and saturated ones, over row counts and row
// lengths from one block to an 8192-value row.
func TestQ6KRowsReg(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	for _, c := range []struct {
		nb, rows int
		sat      string // "" random; else the saturated blocks' scale byte
	}{
		{1, 1, ""}, {2, 3, ""}, {8, 1, ""}, {8, 64, ""}, {32, 5, ""},
		{1, 2, "ones"}, {8, 4, "max"}, {8, 3, "min"}, {32, 2, "max"},
	} {
		r := rand.New(rand.NewPCG(uint64(c.nb), uint64(c.rows)))
		in := c.nb * 256
		data, x := q6Case(r, c.nb, c.rows, c.sat)
		var a actQ
		a.quantize(kern{avx2: true}, x, in, 1, in, 256)
		old := make([]float32, c.rows)
		reg := make([]float32, c.rows)
		dotQ6KRowsAVX2(&data[0], &a.q[0], &a.d[0], &a.bs[0], c.nb, c.rows, &old[0])
		dotQ6KRowsRegAVX2(&data[0], &a.q[0], &a.d[0], &a.bs[0], c.nb, c.rows, &reg[0])
		rb := kernels.Q6_K.RowBytes(in)
		for o := range old {
			if math.Float32bits(old[o]) != math.Float32bits(reg[o]) {
				t.Errorf("nb=%d rows=%d sat=%q row %d: register loop %v, spilling loop %v", c.nb, c.rows, c.sat, o, reg[o], old[o])
			}
			want := dotQ6KGo(data[o*rb:(o+1)*rb], a.q, a.d, a.bs)
			if d := math.Abs(float64(reg[o] - want)); !(d <= 1e-4*max(1, math.Abs(float64(want)))) {
				t.Errorf("nb=%d rows=%d sat=%q row %d: register loop %v, plain Go %v", c.nb, c.rows, c.sat, o, reg[o], want)
			}
		}
	}
}

// FuzzQ6KRowsReg checks the register-scale Q6_K row loop against the
// spilling loop (bit for bit) and plain Go on weight bytes from the fuzzer
// (any ql, qh and scales; d forced finite), with the activation row drawn
// from the seed.
func FuzzQ6KRowsReg(f *testing.F) {
	if !hasAVX2 {
		f.Skip("no AVX2 kernels on this machine or build")
	}
	f.Add(uint64(1), uint8(1), uint8(1), []byte{0xff, 0x00, 0x80, 0x7f})
	f.Add(uint64(7), uint8(4), uint8(3), []byte{0x12, 0x34})
	f.Fuzz(func(t *testing.T, seed uint64, nb8, rows8 uint8, w []byte) {
		nb, rows := 1+int(nb8%8), 1+int(rows8%5)
		in := nb * 256
		r := rand.New(rand.NewPCG(seed, 17))
		data := randBlocks(r, kernels.Q6_K, rows, in)
		for i := range data {
			if len(w) > 0 && i%210 < 208 {
				data[i] ^= w[i%len(w)]
			}
		}
		x := randF(r, in)
		var a actQ
		a.quantize(kern{avx2: true}, x, in, 1, in, 256)
		old := make([]float32, rows)
		reg := make([]float32, rows)
		dotQ6KRowsAVX2(&data[0], &a.q[0], &a.d[0], &a.bs[0], nb, rows, &old[0])
		dotQ6KRowsRegAVX2(&data[0], &a.q[0], &a.d[0], &a.bs[0], nb, rows, &reg[0])
		rb := kernels.Q6_K.RowBytes(in)
		for o := range old {
			if math.Float32bits(old[o]) != math.Float32bits(reg[o]) {
				t.Fatalf("row %d: register loop %v, spilling loop %v", o, reg[o], old[o])
			}
			want := dotQ6KGo(data[o*rb:(o+1)*rb], a.q, a.d, a.bs)
			if d := math.Abs(float64(reg[o] - want)); !(d <= 1e-4*max(1, math.Abs(float64(want)))) {
				t.Fatalf("row %d: register loop %v, plain Go %v", o, reg[o], want)
			}
		}
	})
}

// BenchmarkQ6KRowKernels compares the spilling Q6_K row loop
// (qdotgen_amd64.s, "spill") with the register-scale loop (q6rows_amd64.s,
// "reg") on one thread, alternating them within each iteration so that
// both see the same load: weights in L2 (256 rows of 2048 values) and
// streamed from memory (streamBytes of rows, in chunks of 64 rows as the
// pool hands them out). GB/cpu-s counts weight bytes per CPU-second of
// each kernel.
func BenchmarkQ6KRowKernels(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	benchRowLoops(b, kernels.Q6_K, []string{"spill", "reg"}, []rowLoopFn{dotQ6KRowsAVX2, dotQ6KRowsRegAVX2})
}

// benchRowLoops times row loops of one k-quant type against each other
// (see BenchmarkQ6KRowKernels).
func benchRowLoops(b *testing.B, dt kernels.DType, names []string, loops []rowLoopFn) {
	const in, chunk = 2048, 64
	r := rand.New(rand.NewPCG(17, 20))
	var a actQ
	a.quantize(kern{avx2: true}, randF(r, in), in, 1, in, 256)
	nb := in / 256
	rb := dt.RowBytes(in)
	for _, place := range []struct {
		name string
		rows int
	}{{"L2", 256}, {"mem", streamBytes / rb}} {
		b.Run(place.name, func(b *testing.B) {
			rows := place.rows &^ (chunk - 1)
			data := randBlocks(r, dt, rows, in)
			out := make([]float32, rows)
			cpu := make([]float64, len(loops))
			for i := 0; i < b.N; i++ {
				for j := range loops {
					v := (i + j) % len(loops)
					c0 := processCPU()
					for o := 0; o < rows; o += chunk {
						loops[v](&data[o*rb], &a.q[0], &a.d[0], &a.bs[0], nb, chunk, &out[o])
					}
					cpu[v] += (processCPU() - c0).Seconds()
				}
			}
			for v, name := range names {
				if cpu[v] > 0 {
					b.ReportMetric(float64(len(data))*float64(b.N)/cpu[v]/1e9, name+"-GB/cpu-s")
				}
			}
		})
	}
}
