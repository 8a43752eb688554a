package cpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
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

// TestQ6KRowsReg checks the row loops of q6rows_amd64.s against the loops
// of qdotgen_amd64.s they replace (bit for bit) and the plain-Go dot
// products (to float32 summation order; a NaN fails), on random blocks and
// saturated ones, over row counts and row lengths from one block to an
// 8192-value row: the register-scale Q6_K loop and the Q5_K loop with the
// longer prefetch distance.
func TestQ6KRowsReg(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	for _, k := range []struct {
		dt       kernels.DType
		old, new rowLoopFn
		ref      func(w []byte, xq []int8, xd []float32, bs []int16) float32
	}{
		{kernels.Q6_K, dotQ6KRowsAVX2, dotQ6KRowsRegAVX2, dotQ6KGo},
		{kernels.Q5_K, dotQ5KRowsAVX2, dotQ5KRowsPfAVX2, dotQ5KGo},
	} {
		for _, c := range []struct {
			nb, rows int
			sat      string // "" random; else the saturated blocks' scale byte
		}{
			{1, 1, ""}, {2, 3, ""}, {8, 1, ""}, {8, 64, ""}, {32, 5, ""},
			{1, 2, "ones"}, {8, 4, "max"}, {8, 3, "min"}, {32, 2, "max"},
		} {
			r := rand.New(rand.NewPCG(uint64(c.nb), uint64(c.rows)))
			in := c.nb * 256
			var data []byte
			var x []float32
			if k.dt == kernels.Q6_K {
				data, x = q6Case(r, c.nb, c.rows, c.sat)
			} else {
				data, x = q5Case(r, c.nb, c.rows, c.sat != "")
			}
			var a actQ
			a.quantize(kern{avx2: true}, x, in, 1, in, 256)
			old := make([]float32, c.rows)
			got := make([]float32, c.rows)
			k.old(&data[0], &a.q[0], &a.d[0], &a.bs[0], c.nb, c.rows, &old[0])
			k.new(&data[0], &a.q[0], &a.d[0], &a.bs[0], c.nb, c.rows, &got[0])
			rb := k.dt.RowBytes(in)
			for o := range old {
				if math.Float32bits(old[o]) != math.Float32bits(got[o]) {
					t.Errorf("%v nb=%d rows=%d sat=%q row %d: new loop %v, old loop %v", k.dt, c.nb, c.rows, c.sat, o, got[o], old[o])
				}
				want := k.ref(data[o*rb:(o+1)*rb], a.q, a.d, a.bs)
				if d := math.Abs(float64(got[o] - want)); !(d <= magTol(k.dt, data[o*rb:(o+1)*rb], a.q, a.d)) {
					t.Errorf("%v nb=%d rows=%d sat=%q row %d: new loop %v, plain Go %v", k.dt, c.nb, c.rows, c.sat, o, got[o], want)
				}
			}
		}
	}
}

// q5Case fills Q5_K weight rows and an activation row: random blocks, or
// blocks whose bytes are all 0xff (largest scales, mins and values; d and
// dmin finite) against activations of ±1.
func q5Case(r *rand.Rand, nb, rows int, sat bool) (data []byte, x []float32) {
	in := nb * 256
	data = randBlocks(r, kernels.Q5_K, rows, in)
	x = randF(r, in)
	if !sat {
		return data, x
	}
	for i := range data {
		data[i] = 0xff
	}
	for o := 0; o < len(data); o += 176 {
		data[o+1], data[o+3] = 0x3c, 0x3c
	}
	for i := range x {
		x[i] = float32(1 - 2*(i%2))
	}
	return data, x
}

// magTol is the tolerance of a Q6_K or Q5_K row's AVX2 result against
// plain Go: float32 summation-order error over the row's super-blocks and
// 16 lanes, relative to the magnitude of the terms (magQ6K, magQ5K), not
// to the result, which can cancel to near zero.
func magTol(dt kernels.DType, w []byte, xq []int8, xd []float32) float64 {
	nb := len(xd)
	if dt == kernels.Q6_K {
		return float64(nb+16) * 0x1p-23 * magQ6K(w, xq, xd)
	}
	return float64(nb+16) * 0x1p-23 * magQ5K(w, xq, xd)
}

// magQ6K is the sum of the magnitudes of the terms dotQ6KGo adds for one
// Q6_K row against quantized activations: per super-block |d·xd| times
// Σ |sc·(q−32)·x|.
func magQ6K(w []byte, xq []int8, xd []float32) float64 {
	var mag float64
	for b := range xd {
		blk := w[b*quant.Q6KBlockBytes : (b+1)*quant.Q6KBlockBytes]
		d := math.Abs(float64(xd[b] * quant.F16ToF32(binary.LittleEndian.Uint16(blk[208:]))))
		xb := xq[b*256 : (b+1)*256]
		var l float64
		for h := 0; h < 2; h++ {
			ql, qh, sc := blk[64*h:], blk[128+32*h:], blk[192+8*h:]
			x := xb[128*h:]
			for j := 0; j < 32; j++ {
				is := j / 16
				for i, q := range [4]int{
					int(ql[j]&0xf|(qh[j]&3)<<4) - 32, int(ql[j+32]&0xf|(qh[j]>>2&3)<<4) - 32,
					int(ql[j]>>4|(qh[j]>>4&3)<<4) - 32, int(ql[j+32]>>4|(qh[j]>>6&3)<<4) - 32,
				} {
					l += math.Abs(float64(int8(sc[is+2*i])) * float64(q) * float64(x[j+32*i]))
				}
			}
		}
		mag += d * l
	}
	return mag
}

// magQ5K is magQ6K for Q5_K: per super-block |d·xd| times Σ sc·q·|x| plus
// |dmin·xd| times Σ m·|x| (the scale and min parts are rounded apart, so
// a row whose parts cancel still carries their error).
func magQ5K(w []byte, xq []int8, xd []float32) float64 {
	var mag float64
	for b := range xd {
		blk := w[b*quant.Q5KBlockBytes : (b+1)*quant.Q5KBlockBytes]
		d := math.Abs(float64(xd[b] * quant.F16ToF32(binary.LittleEndian.Uint16(blk))))
		dmin := math.Abs(float64(xd[b] * quant.F16ToF32(binary.LittleEndian.Uint16(blk[2:]))))
		scales, qh, qs := blk[4:16], blk[16:48], blk[48:]
		xb := xq[b*256 : (b+1)*256]
		var l, m float64
		for g := 0; g < 4; g++ {
			sc1, m1 := scaleMinK4(2*g, scales)
			sc2, m2 := scaleMinK4(2*g+1, scales)
			for j := 0; j < 32; j++ {
				lo := float64(qs[32*g+j]&0xf | (qh[j]>>(2*g)&1)<<4)
				hi := float64(qs[32*g+j]>>4 | (qh[j]>>(2*g+1)&1)<<4)
				x1, x2 := math.Abs(float64(xb[64*g+j])), math.Abs(float64(xb[64*g+32+j]))
				l += float64(sc1)*lo*x1 + float64(sc2)*hi*x2
				m += float64(m1)*x1 + float64(m2)*x2
			}
		}
		mag += d*l + dmin*m
	}
	return mag
}

// FuzzQ6KRowsReg checks the row loops of q6rows_amd64.s (Q6_K, or Q5_K
// when q5 is set) against the loops they replace (bit for bit) and plain
// Go on weight bytes from the fuzzer (any values and scales; d and dmin
// left finite), with the activation row drawn from the seed.
func FuzzQ6KRowsReg(f *testing.F) {
	if !hasAVX2 {
		f.Skip("no AVX2 kernels on this machine or build")
	}
	f.Add(uint64(1), uint8(1), uint8(1), false, []byte{0xff, 0x00, 0x80, 0x7f})
	f.Add(uint64(7), uint8(4), uint8(3), false, []byte{0x12, 0x34})
	f.Add(uint64(3), uint8(2), uint8(2), true, []byte{0xff})
	f.Fuzz(func(t *testing.T, seed uint64, nb8, rows8 uint8, q5 bool, w []byte) {
		nb, rows := 1+int(nb8%8), 1+int(rows8%5)
		dt, old, got, ref := kernels.Q6_K, rowLoopFn(dotQ6KRowsAVX2), rowLoopFn(dotQ6KRowsRegAVX2), dotQ6KGo
		// bytes of each block the fuzzer may flip: all but the float16 scales
		blk, keep := 210, func(i int) bool { return i < 208 }
		if q5 {
			dt, old, got, ref = kernels.Q5_K, dotQ5KRowsAVX2, dotQ5KRowsPfAVX2, dotQ5KGo
			blk, keep = 176, func(i int) bool { return i >= 4 }
		}
		in := nb * 256
		r := rand.New(rand.NewPCG(seed, 17))
		data := randBlocks(r, dt, rows, in)
		for i := range data {
			if len(w) > 0 && keep(i%blk) {
				data[i] ^= w[i%len(w)]
			}
		}
		x := randF(r, in)
		var a actQ
		a.quantize(kern{avx2: true}, x, in, 1, in, 256)
		want := make([]float32, rows)
		out := make([]float32, rows)
		old(&data[0], &a.q[0], &a.d[0], &a.bs[0], nb, rows, &want[0])
		got(&data[0], &a.q[0], &a.d[0], &a.bs[0], nb, rows, &out[0])
		rb := dt.RowBytes(in)
		for o := range out {
			if math.Float32bits(out[o]) != math.Float32bits(want[o]) {
				t.Fatalf("%v row %d: new loop %v, old loop %v", dt, o, out[o], want[o])
			}
			g := ref(data[o*rb:(o+1)*rb], a.q, a.d, a.bs)
			if d := math.Abs(float64(out[o] - g)); !(d <= magTol(dt, data[o*rb:(o+1)*rb], a.q, a.d)) {
				t.Fatalf("%v row %d: new loop %v, plain Go %v", dt, o, out[o], g)
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

// BenchmarkQ5KRowKernels compares the Q5_K row loop of qdotgen_amd64.s
// ("pf1k", weights prefetched 1024 bytes ahead) with its copy in
// q6rows_amd64.s ("pf2k", q6Ahead = 2048 bytes ahead) and, on AVX-512
// VNNI, the loops of q5rows_amd64.s ("vnni1" one row per pass, "vnni2s"
// two streams), as BenchmarkQ6KRowKernels.
func BenchmarkQ5KRowKernels(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	names, loops := []string{"pf1k", "pf2k"}, []rowLoopFn{dotQ5KRowsAVX2, dotQ5KRowsPfAVX2}
	if hasVNNI {
		// the AVX-512 VNNI loops of q5rows_amd64.s: one row per pass, and
		// two streams (each chunk's two halves side by side)
		names = append(names, "vnni1", "vnni2s")
		loops = append(loops, dotQ5KRowsVNNI, func(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32) {
			dotQ5KRows2SVNNI(w, xq, xd, bs, nb, rows/2, out)
		})
	}
	benchRowLoops(b, kernels.Q5_K, names, loops)
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
