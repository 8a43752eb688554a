package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// BenchmarkPadRows times MatMul at batches of 2–17 rows with the ragged
// rows padded to the tiles' 8 (pad) and without (rows: the row loops or
// ×4 tiles on the rows past the last group of 8), on weights streamed from
// memory (copies cycling through 64 MiB, as a decode step reads them).
// It reports CPU-µs per op and per row: padMinRows is where pad starts to
// cost less than rows.
func BenchmarkPadRows(b *testing.B) {
	r := rand.New(rand.NewPCG(17, 19))
	shapes := []struct {
		name    string
		out, in int
	}{{"2048x2048", 2048, 2048}, {"8192x2048", 8192, 2048}, {"2048x8192", 2048, 8192}}
	for _, dt := range []kernels.DType{kernels.Q4_K, kernels.Q6_K, kernels.Q5_K, kernels.Q8_0, kernels.Q4_0} {
		for _, s := range shapes {
			one := randBlocks(r, dt, s.out, s.in)
			copies := max(1, (64<<20)/len(one))
			be := New(Options{QuantizeActivations: true})
			ws := make([]kernels.Tensor, copies)
			for i := range ws {
				w, err := kernels.NewHostWeight(dt, s.out, s.in, append([]byte(nil), one...))
				if err != nil {
					b.Fatal(err)
				}
				if err := be.PrepareMatMul(w, false); err != nil {
					b.Fatal(err)
				}
				ws[i] = w
			}
			for _, n := range []int{2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 20, 23, 24, 25} {
				x := &kernels.Host{R: n, C: s.in, F: randF(r, n*s.in)}
				o := be.Alloc(n, s.out)
				for _, mode := range []string{"rows", "pad"} {
					b.Run(fmt.Sprintf("%v/%s/n%d/%s", dt, s.name, n, mode), func(b *testing.B) {
						be.padMin = -1
						if mode == "pad" {
							be.padMin = 1
						}
						defer func() { be.padMin = 0 }()
						be.MatMul(o, x, ws[0], n)
						b.ResetTimer()
						c0 := processCPU()
						for i := 0; i < b.N; i++ {
							be.MatMul(o, x, ws[i%copies], n)
						}
						us := float64((processCPU() - c0).Microseconds()) / float64(b.N)
						b.ReportMetric(us, "cpu-µs/op")
						b.ReportMetric(us/float64(n), "cpu-µs/row")
					})
				}
			}
			be.Close()
		}
	}
}
