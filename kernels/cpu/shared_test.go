package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// sharedCase is one MatMulShared call: the encodings and row counts of its
// weights, which all have in columns.
type sharedCase struct {
	name string
	dts  []kernels.DType
	rows []int
	in   int
	one  bool // runs as one op (sharedRows1) at one activation row
}

var sharedCases = []sharedCase{
	{"q4k-q4k-q6k", []kernels.DType{kernels.Q4_K, kernels.Q4_K, kernels.Q6_K}, []int{128, 32, 32}, 512, true},
	{"q4k-odd", []kernels.DType{kernels.Q4_K, kernels.Q4_K, kernels.Q4_K}, []int{67, 9, 13}, 768, true},
	{"gate-up", []kernels.DType{kernels.Q4_K, kernels.Q4_K}, []int{192, 192}, 256, true},
	{"q5k-q6k", []kernels.DType{kernels.Q5_K, kernels.Q6_K}, []int{100, 60}, 512, true},
	{"q8-q8-q8", []kernels.DType{kernels.Q8_0, kernels.Q8_0, kernels.Q8_0}, []int{128, 40, 40}, 512, true},
	{"q4_0-q8", []kernels.DType{kernels.Q4_0, kernels.Q8_0}, []int{96, 96}, 512, true},
	{"f16-bf16", []kernels.DType{kernels.F16, kernels.BF16}, []int{80, 80}, 512, true},
	{"tiny", []kernels.DType{kernels.Q4_K, kernels.Q6_K}, []int{4, 3}, 256, true},
	{"four", []kernels.DType{kernels.Q4_K, kernels.Q4_K, kernels.Q4_K, kernels.Q4_K}, []int{40, 40, 40, 40}, 256, true},
	// different activation blocks or no row loop: one MatMul per weight
	{"q8-q4k", []kernels.DType{kernels.Q8_0, kernels.Q4_K}, []int{64, 64}, 512, false},
	{"f32", []kernels.DType{kernels.F32, kernels.F32}, []int{64, 64}, 256, false},
	{"five", []kernels.DType{kernels.Q4_K, kernels.Q4_K, kernels.Q4_K, kernels.Q4_K, kernels.Q4_K}, []int{8, 8, 8, 8, 8}, 256, false},
}

// sharedWeights makes the case's weights.
func sharedWeights(t testing.TB, r *rand.Rand, c sharedCase) []kernels.Tensor {
	ws := make([]kernels.Tensor, len(c.dts))
	for i, dt := range c.dts {
		var (
			w   *kernels.Host
			err error
		)
		if dt == kernels.F32 {
			w = &kernels.Host{R: c.rows[i], C: c.in, DT: kernels.F32, F: randF(r, c.rows[i]*c.in)}
		} else {
			data := randBlocks(r, dt, c.rows[i], c.in)
			sanitizeHalves(dt, data)
			w, err = kernels.NewHostWeight(dt, c.rows[i], c.in, data)
		}
		if err != nil {
			t.Fatal(err)
		}
		ws[i] = w
	}
	return ws
}

// TestMatMulShared checks that MatMulShared equals one MatMul per weight
// bit for bit, at 1 and 3 activation rows and on 1 and 2 threads, writes
// every output, and runs as one op exactly where sharedRows1 says so.
func TestMatMulShared(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 7))
	for _, threads := range []int{1, 2} {
		b := New(Options{Threads: threads, QuantizeActivations: true})
		for _, c := range sharedCases {
			ws := sharedWeights(t, r, c)
			for _, n := range []int{1, 3} {
				x := &kernels.Host{R: n, C: c.in, DT: kernels.F32, F: randF(r, n*c.in)}
				outs := make([]kernels.Tensor, len(ws))
				for i := range ws {
					o := &kernels.Host{R: n, C: c.rows[i], DT: kernels.F32, F: make([]float32, n*c.rows[i])}
					for j := range o.F {
						o.F[j] = float32(math.NaN())
					}
					outs[i] = o
				}
				if got, want := b.sharedRows1(ws, n), c.one && n == 1 && hasAVX2; got != want {
					t.Errorf("%s n=%d: sharedRows1 %v, want %v", c.name, n, got, want)
				}
				b.MatMulShared(outs, x, ws, n)
				for i, w := range ws {
					want := &kernels.Host{R: n, C: c.rows[i], DT: kernels.F32, F: make([]float32, n*c.rows[i])}
					b.MatMul(want, x, w, n)
					got := outs[i].(*kernels.Host).F
					for j := range want.F {
						if math.Float32bits(got[j]) != math.Float32bits(want.F[j]) {
							t.Errorf("threads=%d %s n=%d weight %d value %d: shared %v, MatMul %v", threads, c.name, n, i, j, got[j], want.F[j])
							break
						}
					}
				}
			}
		}
		b.Close()
	}
}

// TestMatMulSharedRef checks the reference backend's MatMulShared against
// its MatMul.
func TestMatMulSharedRef(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 9))
	c := sharedCases[0]
	ws := sharedWeights(t, r, c)
	ref := &kernels.Ref{}
	x := &kernels.Host{R: 1, C: c.in, DT: kernels.F32, F: randF(r, c.in)}
	outs := make([]kernels.Tensor, len(ws))
	for i := range ws {
		outs[i] = &kernels.Host{R: 1, C: c.rows[i], DT: kernels.F32, F: make([]float32, c.rows[i])}
	}
	ref.MatMulShared(outs, x, ws, 1)
	for i, w := range ws {
		want := &kernels.Host{R: 1, C: c.rows[i], DT: kernels.F32, F: make([]float32, c.rows[i])}
		ref.MatMul(want, x, w, 1)
		for j, v := range want.F {
			if got := outs[i].(*kernels.Host).F[j]; math.Float32bits(got) != math.Float32bits(v) {
				t.Fatalf("weight %d value %d: shared %v, MatMul %v", i, j, got, v)
			}
		}
	}
}

// TestMatMulSharedAllocs checks that a one-op MatMulShared allocates
// nothing once its activation buffers have grown.
func TestMatMulSharedAllocs(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(1, 2))
	c := sharedCases[0]
	ws := sharedWeights(t, r, c)
	b := New(Options{Threads: 2, QuantizeActivations: true})
	defer b.Close()
	x := &kernels.Host{R: 1, C: c.in, DT: kernels.F32, F: randF(r, c.in)}
	outs := make([]kernels.Tensor, len(ws))
	for i := range ws {
		outs[i] = &kernels.Host{R: 1, C: c.rows[i], DT: kernels.F32, F: make([]float32, c.rows[i])}
	}
	b.MatMulShared(outs, x, ws, 1)
	allocs := testing.AllocsPerRun(50, func() {
		x.F[0]++ // a new activation row each time: quantized again
		b.MatMulShared(outs, x, ws, 1)
	})
	if allocs != 0 {
		t.Errorf("MatMulShared allocates %v times per call", allocs)
	}
}

// FuzzMatMulShared checks MatMulShared against one MatMul per weight, bit
// for bit, on two threads: up to five weights of fuzzed encodings and row
// counts (large enough to run in parallel, small enough to end in odd
// chunks), blocks with fuzzed bytes.
func FuzzMatMulShared(f *testing.F) {
	f.Add(uint8(3), []byte{5, 5, 6}, []byte{200, 30, 30}, []byte{1, 2, 3})
	f.Add(uint8(2), []byte{0, 1}, []byte{77, 9}, []byte{0xff, 0x7b})
	f.Add(uint8(5), []byte{5, 5, 5, 5, 5}, []byte{1, 2, 3, 4, 5}, []byte{})
	f.Fuzz(func(t *testing.T, nw uint8, types, rows, seed []byte) {
		dts := []kernels.DType{kernels.F16, kernels.BF16, kernels.Q8_0, kernels.Q4_0, kernels.Q5_K, kernels.Q4_K, kernels.Q6_K}
		c := sharedCase{in: 512}
		for i := 0; i < int(nw%5)+1; i++ {
			dt, rw := kernels.Q4_K, 16
			if i < len(types) {
				dt = dts[int(types[i])%len(dts)]
			}
			if i < len(rows) {
				rw = int(rows[i]) + 1
			}
			c.dts, c.rows = append(c.dts, dt), append(c.rows, rw)
		}
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(nw)))
		ws := sharedWeights(t, r, c)
		for _, w := range ws {
			q := w.(*kernels.Host).Q
			for i, v := range seed {
				q[i%len(q)] ^= v
			}
			sanitizeHalves(w.DType(), q)
		}
		b := New(Options{Threads: 2, QuantizeActivations: true})
		defer b.Close()
		x := &kernels.Host{R: 1, C: c.in, DT: kernels.F32, F: randF(r, c.in)}
		outs := make([]kernels.Tensor, len(ws))
		for i := range ws {
			outs[i] = b.Alloc(1, c.rows[i])
		}
		b.MatMulShared(outs, x, ws, 1)
		for i, w := range ws {
			want := b.Alloc(1, c.rows[i]).(*kernels.Host)
			b.MatMul(want, x, w, 1)
			for j, v := range want.F {
				got := outs[i].(*kernels.Host).F[j]
				if math.Float32bits(got) != math.Float32bits(v) && !(math.IsNaN(float64(got)) && math.IsNaN(float64(v))) {
					t.Fatalf("%v weight %d (%v, %d rows) value %d: shared %v, MatMul %v", c.dts, i, c.dts[i], c.rows[i], j, got, v)
				}
			}
		}
	})
}
