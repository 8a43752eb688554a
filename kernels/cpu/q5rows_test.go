package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// q5RowsVariants are the batch-1 Q5_K row paths the tests force: the AVX2
// loop (q5kRows1 without vnni) and, where the machine has AVX-512 VNNI, the
// two-stream and one-row VNNI loops.
func q5RowsVariants() []struct {
	name string
	run  func(w []byte, a *actQ, nb int, out []float32)
} {
	v := []struct {
		name string
		run  func(w []byte, a *actQ, nb int, out []float32)
	}{{"avx2", func(w []byte, a *actQ, nb int, out []float32) { q5kRows1(false, w, a.q, a.d, a.bs, nb, out) }}}
	if hasVNNI {
		v = append(v,
			struct {
				name string
				run  func(w []byte, a *actQ, nb int, out []float32)
			}{"vnni", func(w []byte, a *actQ, nb int, out []float32) { q5kRows1(true, w, a.q, a.d, a.bs, nb, out) }},
			struct {
				name string
				run  func(w []byte, a *actQ, nb int, out []float32)
			}{"vnni1", func(w []byte, a *actQ, nb int, out []float32) {
				dotQ5KRowsVNNI(&w[0], &a.q[0], &a.d[0], &a.bs[0], nb, len(out), &out[0])
			}})
	}
	return v
}

// TestQ5KRowsVNNI checks every batch-1 Q5_K row path against the AVX2 loop
// it replaces (dotQ5KRowsAVX2, bit for bit) and the plain-Go dot product
// (to float32 summation order), for 1–97 rows (odd and even: the
// two-stream loop's halves and its last row), row lengths of 1–32
// super-blocks, random blocks and saturated ones (every byte 0xff: values
// 31, largest scales and mins, against ±1 and −127 activations).
func TestQ5KRowsVNNI(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	type tc struct {
		nb, rows int
		sat      string // "", "ones" (±1 activations) or "max" (−127)
	}
	var cases []tc
	for rows := 1; rows <= 97; rows += 1 + rows/8 {
		cases = append(cases, tc{1 + rows%3, rows, ""})
	}
	cases = append(cases, tc{8, 64, ""}, tc{32, 5, ""}, tc{8, 2, ""}, tc{1, 2, "ones"}, tc{8, 4, "ones"},
		tc{8, 3, "max"}, tc{32, 2, "max"}, tc{2, 97, "max"}, tc{3, 96, "ones"})
	for _, c := range cases {
		r := rand.New(rand.NewPCG(uint64(c.nb), uint64(c.rows)))
		in := c.nb * 256
		data, x := q5Case(r, c.nb, c.rows, c.sat != "")
		if c.sat == "max" {
			for i := range x {
				x[i] = -127
			}
		}
		var a actQ
		a.quantize(kern{avx2: true}, x, in, 1, in, 256)
		want := make([]float32, c.rows)
		dotQ5KRowsAVX2(&data[0], &a.q[0], &a.d[0], &a.bs[0], c.nb, c.rows, &want[0])
		rb := kernels.Q5_K.RowBytes(in)
		for _, v := range q5RowsVariants() {
			got := make([]float32, c.rows)
			v.run(data, &a, c.nb, got)
			for o := range got {
				if math.Float32bits(got[o]) != math.Float32bits(want[o]) {
					t.Errorf("%s nb=%d rows=%d sat=%q row %d: %v, dotQ5KRowsAVX2 %v", v.name, c.nb, c.rows, c.sat, o, got[o], want[o])
				}
				ref := dotQ5KGo(data[o*rb:(o+1)*rb], a.q, a.d, a.bs)
				if d := math.Abs(float64(got[o] - ref)); !(d <= magTol(kernels.Q5_K, data[o*rb:(o+1)*rb], a.q, a.d)) {
					t.Errorf("%s nb=%d rows=%d sat=%q row %d: %v, plain Go %v", v.name, c.nb, c.rows, c.sat, o, got[o], ref)
				}
			}
		}
	}
}

// TestQ5KRowsVNNIAllocs checks that the batch-1 Q5_K path allocates
// nothing per call.
func TestQ5KRowsVNNIAllocs(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	const nb, rows = 8, 33
	r := rand.New(rand.NewPCG(5, 6))
	data, x := q5Case(r, nb, rows, false)
	var a actQ
	a.quantize(kern{avx2: true}, x, nb*256, 1, nb*256, 256)
	out := make([]float32, rows)
	for _, vnni := range []bool{false, hasVNNI} {
		if n := testing.AllocsPerRun(20, func() { q5kRows1(vnni, data, a.q, a.d, a.bs, nb, out) }); n != 0 {
			t.Errorf("vnni=%v: %v allocations per call", vnni, n)
		}
	}
}

// FuzzQ5KRowsVNNI checks the VNNI Q5_K row loops against dotQ5KRowsAVX2
// (bit for bit) on weight bytes from the fuzzer (any values, scales and
// mins; d and dmin left finite) and an activation row drawn from the seed.
func FuzzQ5KRowsVNNI(f *testing.F) {
	if !hasVNNI {
		f.Skip("no AVX-512 VNNI kernels on this machine or build")
	}
	f.Add(uint64(1), uint8(1), uint8(1), []byte{0xff, 0x00, 0x80, 0x7f})
	f.Add(uint64(7), uint8(4), uint8(3), []byte{0x12, 0x34})
	f.Add(uint64(3), uint8(2), uint8(6), []byte{0xff})
	f.Fuzz(func(t *testing.T, seed uint64, nb8, rows8 uint8, w []byte) {
		nb, rows := 1+int(nb8%8), 1+int(rows8%9)
		in := nb * 256
		r := rand.New(rand.NewPCG(seed, 17))
		data := randBlocks(r, kernels.Q5_K, rows, in)
		for i := range data {
			if len(w) > 0 && i%176 >= 4 {
				data[i] ^= w[i%len(w)]
			}
		}
		x := randF(r, in)
		var a actQ
		a.quantize(kern{avx2: true}, x, in, 1, in, 256)
		want := make([]float32, rows)
		dotQ5KRowsAVX2(&data[0], &a.q[0], &a.d[0], &a.bs[0], nb, rows, &want[0])
		for _, v := range q5RowsVariants() {
			got := make([]float32, rows)
			v.run(data, &a, nb, got)
			for o := range got {
				if math.Float32bits(got[o]) != math.Float32bits(want[o]) {
					t.Fatalf("%s row %d: %v, dotQ5KRowsAVX2 %v", v.name, o, got[o], want[o])
				}
			}
		}
	})
}
