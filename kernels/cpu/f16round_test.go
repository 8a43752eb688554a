package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/quant"
)

// TestRoundF16 checks the F16C rounding of softmaxF16Vec against the
// scalar quant.F32ToF16 / quant.F16ToF32 pair bit for bit: every float16
// value, the midpoints between neighbours (ties to even), values next to
// them, float16 subnormals, overflow to infinity, random probabilities
// times a random reciprocal, and every length from 0 to 40 (tails).
func TestRoundF16(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	var vals []float32
	for h := 0; h < 0x7c00; h++ {
		v := quant.F16ToF32(uint16(h))
		next := quant.F16ToF32(uint16(h + 1))
		mid := float32((float64(v) + float64(next)) / 2)
		for _, u := range []float32{v, mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9)} {
			vals = append(vals, u, -u)
		}
	}
	vals = append(vals, 65519.99, 65520, 1e6, float32(math.Inf(1)), 5.9e-8, 2.9e-8, 3e-8, 1e-30)
	r := rand.New(rand.NewPCG(17, 16))
	for range 10000 {
		vals = append(vals, r.Float32()*float32(math.Exp(-20*r.Float64())))
	}
	for _, c := range []struct {
		name string
		s    float32
	}{{"s=1", 1}, {"s=0.37", 0.37}, {"s=1/3.9", 1 / 3.9}, {"s=1e4", 1e4}} {
		t.Run(c.name, func(t *testing.T) {
			got := append([]float32(nil), vals...)
			kern{avx2: true}.roundF16(got, c.s)
			for i, v := range vals {
				want := quant.F16ToF32(quant.F32ToF16(v * c.s))
				if math.Float32bits(got[i]) != math.Float32bits(want) {
					t.Fatalf("%g·%g: got %g (%#08x), want %g (%#08x)", v, c.s, got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
				}
			}
		})
	}
	for n := 0; n <= 40; n++ {
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			x := make([]float32, n)
			for i := range x {
				x[i] = r.Float32()
			}
			got, want := append([]float32(nil), x...), append([]float32(nil), x...)
			kern{avx2: true}.roundF16(got, 0.61)
			kern{}.roundF16(want, 0.61)
			for i := range x {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n=%d [%d]: got %g, want %g", n, i, got[i], want[i])
				}
			}
		})
	}
}
