package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// BenchmarkMatMulExpertsQ8 times MatMulExperts on Q8_0 and Q4_0 experts of
// an expert-shaped matmul (e experts of rows × cols, n routed rows spread
// at random over them: groups of about n/e rows, prefill-sized, so that
// most groups take the 4×16 tiles), both threads of the backend.
// GMAC/cpu-s counts the multiply-adds per CPU-second of the process.
func BenchmarkMatMulExpertsQ8(b *testing.B) {
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0} {
		for _, c := range []struct{ e, n, rows, cols int }{
			{8, 128, 2880, 2880}, {8, 256, 1024, 2048}, {32, 128, 768, 2048},
		} {
			b.Run(fmt.Sprintf("%v/e%d_n%d_%dx%d", dt, c.e, c.n, c.rows, c.cols), func(b *testing.B) {
				r := rand.New(rand.NewPCG(20, 17))
				w, start := expertCase(r, dt, c.e, c.n, c.rows, c.cols)
				x := &kernels.Host{R: c.n, C: c.cols, F: randF(r, c.n*c.cols)}
				be := New(Options{Threads: 2, QuantizeActivations: true})
				defer be.Close()
				out := be.Alloc(c.n, c.rows)
				be.MatMulExperts(out, x, w, start)
				c0 := processCPU()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					x.F[i%len(x.F)] += 1 // new rows: each call quantizes them
					be.MatMulExperts(out, x, w, start)
				}
				cpu := (processCPU() - c0).Seconds()
				if cpu > 0 {
					b.ReportMetric(float64(c.n*c.rows*c.cols)*float64(b.N)/cpu/1e9, "GMAC/cpu-s")
				}
			})
		}
	}
}
