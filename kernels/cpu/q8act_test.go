package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// checkDotQ8Q8 compares the integer Q8_0 kernels (assembly where the CPU
// has VNNI, and the Go twin) with the float reference on the dequantized
// activations, for 4 weight rows of nb blocks.
func checkDotQ8Q8(t *testing.T, x []float32, wf []float32, nb int) {
	t.Helper()
	K := nb * kernels.Q8Block
	w, err := kernels.NewHostWeight(kernels.Q8_0, 4, K, quant.QuantizeQ8_0(wf))
	if err != nil {
		t.Fatal(err)
	}
	// the VNNI kernel reads decoded block scales, which NewHostWeight no
	// longer keeps (no second copy of a weight): decode them here
	w.S = make([]float32, 4*nb)
	for i := range w.S {
		w.S[i] = quant.F16ToF32(uint16(w.Q[i*kernels.Q8BlockBytes]) | uint16(w.Q[i*kernels.Q8BlockBytes+1])<<8)
	}
	q, d := make([]int8, K), make([]float32, nb)
	quantizeQ8Act(x, q, d)
	xd := make([]float32, K)
	for j := range xd {
		b := j / kernels.Q8Block
		var amax float64
		for _, v := range x[b*kernels.Q8Block : (b+1)*kernels.Q8Block] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		xd[j] = float32(q[j]) * d[b]
		// the rounding error per element is at most half a step of
		// amax/127, plus |q| ≤ 127 times the float16 scale's rounding
		step := amax / 127
		if e := math.Abs(float64(xd[j] - x[j])); e > step/2*1.0001+127*math.Abs(float64(d[b])-step)+1e-30 {
			t.Fatalf("element %d: %v quantized to %v (step %v, scale %v)", j, x[j], xd[j], step, d[b])
		}
	}
	ws := w.DT.RowBytes(K)
	wr := make([]float32, K)
	var want, sumAbs [4]float32
	for c := 0; c < 4; c++ {
		quant.DequantizeQ8_0(wr, w.Q[c*ws:(c+1)*ws])
		var s, a float64
		for j := range wr {
			s += float64(xd[j]) * float64(wr[j])
			a += math.Abs(float64(xd[j]) * float64(wr[j]))
		}
		want[c], sumAbs[c] = float32(s), float32(a)
	}
	ks := []kern{{}}
	if hasVNNI {
		ks = append(ks, kern{simd: true, vnni: true})
	}
	for _, k := range ks {
		var got [4]float32
		k.dotq8q8x4(q, d, w.Q, ws, w.S, nb, nb, &got)
		for c := range got {
			// float32 accumulation: the error scales with the sum of the
			// terms' magnitudes, not with the (possibly cancelled) result
			if d := math.Abs(float64(got[c] - want[c])); d > 1e-4*(1+math.Abs(float64(want[c])))+2e-6*float64(sumAbs[c]) {
				t.Fatalf("vnni=%v nb=%d row %d: got %v want %v", k.vnni, nb, c, got[c], want[c])
			}
		}
	}
}

func TestDotQ8Q8(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, nb := range []int{1, 2, 3, 24, 64} {
		K := nb * kernels.Q8Block
		checkDotQ8Q8(t, randF(r, K), randF(r, 4*K), nb)
		// zero blocks, extreme weights (-127..127 after quantization) and
		// one large outlier per block
		x := make([]float32, K)
		wf := randF(r, 4*K)
		for j := range x {
			if j%kernels.Q8Block == 3 {
				x[j] = -1000
			} else if (j/kernels.Q8Block)%2 == 1 {
				x[j] = float32(j % 7)
			}
		}
		for j := range wf {
			wf[j] = float32(1 - 2*(j%2))
		}
		checkDotQ8Q8(t, x, wf, nb)
	}
}

// FuzzDotQ8Q8 checks the integer kernels on random lengths and scales.
func FuzzDotQ8Q8(f *testing.F) {
	f.Add(uint8(1), uint64(1), float32(1))
	f.Add(uint8(24), uint64(2), float32(1e-3))
	f.Fuzz(func(t *testing.T, nb8 uint8, seed uint64, scale float32) {
		if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) || math.Abs(float64(scale)) > 1e6 || math.Abs(float64(scale)) < 1e-6 {
			t.Skip()
		}
		nb := int(nb8%64) + 1
		r := rand.New(rand.NewPCG(seed, 9))
		x := randF(r, nb*kernels.Q8Block)
		for j := range x {
			x[j] *= scale
		}
		checkDotQ8Q8(t, x, randF(r, 4*nb*kernels.Q8Block), nb)
	})
}
