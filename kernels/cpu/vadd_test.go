package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// vaddValues are random floats at several scales and the special values
// (±0, ±Inf, NaN, subnormals, ±MaxFloat32) that the adds meet.
func vaddValues(r *rand.Rand, n int) []float32 {
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, math.MaxFloat32, -math.MaxFloat32, 1e-38}
	v := make([]float32, n)
	for i := range v {
		switch r.IntN(8) {
		case 0:
			v[i] = special[r.IntN(len(special))]
		default:
			v[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(9)-4)))
		}
	}
	return v
}

// TestVAdd checks addRow and scaleAdd (vadd_amd64.s and the Go tail)
// against plain Go loops bit for bit (NaN for NaN) for every length 0–70
// and 2880, at offsets that leave the rows unaligned, with sentinels after
// the row that must stay; and both backend ops that use them (AddRow,
// ScatterAdd) with 0 allocations.
func TestVAdd(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 40))
	lens := []int{2880}
	for n := 0; n <= 70; n++ {
		lens = append(lens, n)
	}
	for _, k := range []kern{{avx2: hasAVX2}, {}} {
		for _, n := range lens {
			for _, off := range []int{0, 1, 3} {
				x, b := vaddValues(r, n+off+4), vaddValues(r, n+off)
				w := vaddValues(r, 1)[0]
				if r.IntN(2) == 0 {
					w = float32(r.NormFloat64())
				}
				want1, want2 := append([]float32(nil), x...), append([]float32(nil), x...)
				for i := 0; i < n; i++ {
					want1[off+i] += b[off+i]
					want2[off+i] += float32(w * b[off+i])
				}
				got1, got2 := append([]float32(nil), x...), append([]float32(nil), x...)
				k.addRow(got1[off:off+n], b[off:])
				k.scaleAdd(got2[off:off+n], b[off:], w)
				for i := range x {
					if !sameF32(got1[i], want1[i]) {
						t.Fatalf("avx2=%v n=%d off=%d: addRow [%d] = %v, Go loop %v", k.avx2, n, off, i, got1[i], want1[i])
					}
					if !sameF32(got2[i], want2[i]) {
						t.Fatalf("avx2=%v n=%d off=%d w=%v: scaleAdd [%d] = %v, Go loop %v", k.avx2, n, off, w, i, got2[i], want2[i])
					}
				}
			}
		}
	}
	be := New(Options{Threads: 2})
	defer be.Close()
	const rows, c = 5, 2880
	x := &kernels.Host{R: rows, C: c, F: vaddValues(r, rows*c)}
	bias := &kernels.Host{R: 1, C: c, F: vaddValues(r, c)}
	y := &kernels.Host{R: 3, C: c, F: vaddValues(r, 3*c)}
	dst, wts := []int32{4, 0, 4}, []float32{0.5, -1.25, 3}
	want := append([]float32(nil), x.F...)
	for i := 0; i < rows; i++ {
		for j := 0; j < c; j++ {
			want[i*c+j] += bias.F[j]
		}
	}
	for i, d := range dst {
		for j := 0; j < c; j++ {
			want[int(d)*c+j] += float32(wts[i] * y.F[i*c+j])
		}
	}
	be.AddRow(x, bias, rows)
	be.ScatterAdd(x, y, dst, wts)
	for i, v := range want {
		if !sameF32(x.F[i], v) {
			t.Fatalf("AddRow + ScatterAdd [%d] = %v, Go loops %v", i, x.F[i], v)
		}
	}
	if a := testing.AllocsPerRun(10, func() { be.AddRow(x, bias, rows); be.ScatterAdd(x, y, dst, wts) }); a != 0 {
		t.Errorf("%v allocations per AddRow + ScatterAdd", a)
	}
}

// sameF32 reports whether a and b have the same bits, or are both NaN.
func sameF32(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// BenchmarkVAdd times AddRow and ScatterAdd at a 16-stream decode step's
// MoE shapes (64 rows of 2880): the AVX2 loops against the Go loops.
//
//	go test ./kernels/cpu -run XXX -bench VAdd -benchtime 2000x
func BenchmarkVAdd(b *testing.B) {
	r := rand.New(rand.NewPCG(20, 41))
	const rows, c = 64, 2880
	x, y, bias := randF(r, rows*c), randF(r, rows*c), randF(r, c)
	for _, k := range []kern{{avx2: true}, {}} {
		name := "go"
		if k.avx2 {
			if !hasAVX2 {
				continue
			}
			name = "avx2"
		}
		b.Run("addrow/"+name, func(b *testing.B) {
			for b.Loop() {
				for i := 0; i < rows; i++ {
					k.addRow(x[i*c:(i+1)*c], bias)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows*c), "ns/value")
		})
		b.Run("scaleadd/"+name, func(b *testing.B) {
			for b.Loop() {
				for i := 0; i < rows; i++ {
					k.scaleAdd(x[(i%16)*c:(i%16+1)*c], y[i*c:(i+1)*c], 0.25)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows*c), "ns/value")
		})
	}
}
