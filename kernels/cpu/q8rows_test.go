package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/sluice-llm/sluice/kernels"
)

// q8RowLoop is the signature of the multi-row Q8_0/Q4_0 loops.
type q8RowLoop func(w *byte, xq *int8, xd *float32, nb int, rows int, out *float32)

// q8RowVariant is one loop of q8rows_amd64.s with its rows per pass (the
// benchmark and the test take any multi-row loop the generator writes).
type q8RowVariant struct {
	name string
	dt   kernels.DType
	per  int
	f    q8RowLoop
}

func q8RowVariants() []q8RowVariant {
	return []q8RowVariant{
		{"Q8_0/pf", kernels.Q8_0, 1, dotQ8_0RowsPfAVX2},
		{"Q4_0/pf", kernels.Q4_0, 1, dotQ4_0RowsPfAVX2},
		{"Q4_0/quad", kernels.Q4_0, 1, dotQ4_0RowsQuadAVX2},
	}
}

// oldQ4_0Rows is the one-row Q4_0 loop of qdotgen_amd64.s called per row:
// the reference and the baseline of the Q4_0 loops.
func oldQ4_0Rows(w *byte, xq *int8, xd *float32, nb int, rows int, out *float32) {
	ws := unsafe.Slice(w, rows*nb*18)
	outs := unsafe.Slice(out, rows)
	for o := range outs {
		outs[o] = dotQ4_0AVX2(&ws[o*nb*18], xq, xd, nb)
	}
}

// BenchmarkQ8Rows compares the batch-1 Q8_0 and Q4_0 row loops of
// q8rows_amd64.s with the old one-row loops of qdotgen_amd64.s on one
// thread, all variants alternated within each iteration so that they see
// the same load: weights in L2 (256 rows of 2048 values: the loops'
// arithmetic) and streamed from memory (streamBytes of rows in chunks of
// 256 rows, the pool's chunk for a 2048-row matrix on two threads).
// GB/cpu-s counts weight bytes per CPU-second of each loop.
func BenchmarkQ8Rows(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	const in, chunk = 2048, 256
	r := rand.New(rand.NewPCG(17, 21))
	var a actQ
	a.quantize(kern{avx2: true}, randF(r, in), in, 1, in, 32)
	nb := in / 32
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0} {
		vs := []q8RowVariant{{"xxxx/old", dt, 1, dotQ8_0RowsAVX2}}
		if dt == kernels.Q4_0 {
			vs[0].f = oldQ4_0Rows
		}
		for _, v := range q8RowVariants() {
			if v.dt == dt {
				vs = append(vs, v)
			}
		}
		rb := dt.RowBytes(in)
		for _, place := range []struct {
			name string
			rows int
		}{{"L2", 256}, {"mem", streamBytes / rb}} {
			b.Run(dt.String()+"/"+place.name, func(b *testing.B) {
				rows := place.rows &^ (chunk - 1)
				data := randBlocks(r, dt, rows, in)
				out := make([]float32, rows)
				cpu := make([]float64, len(vs))
				for i := 0; i < b.N; i++ {
					for j := range vs {
						v := (i + j) % len(vs)
						c0 := processCPU()
						for o := 0; o < rows; o += chunk {
							vs[v].f(&data[o*rb], &a.q[0], &a.d[0], nb, chunk, &out[o])
						}
						cpu[v] += (processCPU() - c0).Seconds()
					}
				}
				for v := range vs {
					if cpu[v] > 0 {
						b.ReportMetric(float64(len(data))*float64(b.N)/cpu[v]/1e9, vs[v].name[5:]+"-GB/cpu-s")
					}
				}
			})
		}
	}
}

// TestQ8Rows checks every multi-row Q8_0/Q4_0 loop against the one-row
// loops of qdotgen_amd64.s (bit for bit: same integer sums, same
// accumulation order) and against the plain-Go dot products, on random
// and saturated blocks, odd and even block counts and several row counts.
func TestQ8Rows(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 22))
	for _, v := range q8RowVariants() {
		for _, nb := range []int{1, 2, 3, 5, 8, 64, 65} {
			for _, m := range []int{1, 2, 3, 5} {
				for _, sat := range []bool{false, true} {
					rows, in := m*v.per, nb*32
					data := randBlocks(r, v.dt, rows, in)
					x := randF(r, in)
					if sat {
						saturate(v.dt, data)
						for i := range x {
							x[i] = float32(1 - 2*(i&1))
						}
					}
					var a actQ
					a.quantize(kern{avx2: true}, x, in, 1, in, 32)
					rb := v.dt.RowBytes(in)
					got := make([]float32, rows+1)
					got[rows] = 12345
					v.f(&data[0], &a.q[0], &a.d[0], nb, rows, &got[0])
					if got[rows] != 12345 {
						t.Fatalf("%s nb=%d rows=%d: wrote past the last row", v.name, nb, rows)
					}
					for o := 0; o < rows; o++ {
						w := data[o*rb : (o+1)*rb]
						var old, plain float32
						if v.dt == kernels.Q8_0 {
							dotQ8_0RowsAVX2(&w[0], &a.q[0], &a.d[0], nb, 1, &old)
							plain = dotQ8Q8Go(a.q, a.d, w, nb)
						} else {
							old = dotQ4_0AVX2(&w[0], &a.q[0], &a.d[0], nb)
							plain = dotQ4_0Go(w, a.q, a.d)
						}
						if math.Float32bits(got[o]) != math.Float32bits(old) {
							t.Errorf("%s nb=%d rows=%d sat=%v row %d: %v, one-row loop %v", v.name, nb, rows, sat, o, got[o], old)
						}
						if d := math.Abs(float64(got[o] - plain)); !(d <= 1e-4*(1+math.Abs(float64(plain)))) {
							t.Errorf("%s nb=%d rows=%d sat=%v row %d: %v, plain Go %v", v.name, nb, rows, sat, o, got[o], plain)
						}
					}
				}
			}
		}
	}
}

// saturate sets every weight of Q8_0 or Q4_0 blocks to its extreme
// (Q8_0: −128 and 127 alternating; Q4_0: nibble 0, i.e. −8), keeping the
// scales.
func saturate(dt kernels.DType, data []byte) {
	bs, v := 34, []byte{0x80, 0x7f}
	if dt == kernels.Q4_0 {
		bs, v = 18, []byte{0, 0}
	}
	for b := 0; b+bs <= len(data); b += bs {
		for i := 2; i < bs; i++ {
			data[b+i] = v[i&1]
		}
	}
}

// FuzzQ8Rows drives the loops of q8rows_amd64.s with fuzzed weight and
// activation bytes: the format (ti), block count (nb8) and row count
// (rows8) pick the shape, seed fills the blocks (the scales are kept
// finite) and the activation; each row must equal the one-row loop of
// qdotgen_amd64.s bit for bit.
func FuzzQ8Rows(f *testing.F) {
	if !hasAVX2 {
		f.Skip("no AVX2 kernels on this machine or build")
	}
	f.Add(uint8(0), uint8(3), uint8(2), []byte{1, 2, 3})
	f.Add(uint8(1), uint8(64), uint8(5), []byte{0xff, 0x80, 0x7f})
	f.Fuzz(func(t *testing.T, ti, nb8, rows8 uint8, seed []byte) {
		vs := q8RowVariants()
		v := vs[int(ti)%len(vs)]
		nb, rows := int(nb8%80)+1, (int(rows8%9)+1)*v.per
		in := nb * 32
		var s [32]byte
		copy(s[:], seed)
		r := rand.New(rand.NewChaCha8(s))
		data := randBlocks(r, v.dt, rows, in)
		// the fuzzer's bytes overwrite the weights, scales excepted
		bs := 34
		if v.dt == kernels.Q4_0 {
			bs = 18
		}
		for i, c := range seed {
			if j := i % len(data); j%bs >= 2 {
				data[j] = c
			}
		}
		x := randF(r, in)
		var a actQ
		a.quantize(kern{avx2: true}, x, in, 1, in, 32)
		got := make([]float32, rows)
		v.f(&data[0], &a.q[0], &a.d[0], nb, rows, &got[0])
		rb := v.dt.RowBytes(in)
		for o := 0; o < rows; o++ {
			w := data[o*rb : (o+1)*rb]
			var old float32
			if v.dt == kernels.Q8_0 {
				dotQ8_0RowsAVX2(&w[0], &a.q[0], &a.d[0], nb, 1, &old)
			} else {
				old = dotQ4_0AVX2(&w[0], &a.q[0], &a.d[0], nb)
			}
			if math.Float32bits(got[o]) != math.Float32bits(old) {
				t.Fatalf("%s nb=%d rows=%d row %d: %v, one-row loop %v", v.name, nb, rows, o, got[o], old)
			}
		}
	})
}
