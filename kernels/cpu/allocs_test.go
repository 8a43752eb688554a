package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// checkMatMulAllocs fails t when a warmed-up MatMul of random dt weights
// (out rows) allocates, for each n×in activation shape, on 1 and 2 threads.
func checkMatMulAllocs(t *testing.T, dt kernels.DType, r *rand.Rand, out int, shapes []struct{ n, in int }) {
	t.Helper()
	for _, c := range shapes {
		w, err := kernels.NewHostWeight(dt, out, c.in, randBlocks(r, dt, out, c.in))
		if err != nil {
			t.Fatal(err)
		}
		x := &kernels.Host{R: c.n, C: c.in, F: randF(r, c.n*c.in)}
		res := &kernels.Host{R: c.n, C: out, F: make([]float32, c.n*out)}
		for _, threads := range []int{1, 2} {
			b := New(Options{Threads: threads, QuantizeActivations: true})
			b.MatMul(res, x, w, c.n)
			if a := testing.AllocsPerRun(20, func() { b.MatMul(res, x, w, c.n) }); a != 0 {
				t.Errorf("%v, %d rows of %d values, %d threads: %v allocations per MatMul", dt, c.n, c.in, threads, a)
			}
			b.Close()
		}
	}
}
