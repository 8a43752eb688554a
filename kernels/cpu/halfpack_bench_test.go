package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// BenchmarkHalfPackPanels times packPanels on 16 activation rows of the
// 1B layer's reduction lengths (the serial step before every one-panel
// F16/BF16 op).
func BenchmarkHalfPackPanels(b *testing.B) {
	if !hasAVX512 {
		b.Skip("no AVX-512 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(3, 5))
	for _, k := range []int{2048, 8192} {
		b.Run(fmt.Sprintf("k%d", k), func(b *testing.B) {
			be := New(Options{Threads: 1})
			defer be.Close()
			x := &kernels.Host{R: 16, C: k, F: randF(r, 16*k)}
			w := &kernels.Host{R: 16, C: k, DT: kernels.F16}
			t := &qmatTask{k: be.k, x: x, w: w, n: 16}
			t.packPanels()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t.packPanels()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "µs/pack")
		})
	}
}
