package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/kernels"
)

// BenchmarkHugeRows1 multiplies one activation row with a 512 MiB
// repacked Q4_K weight (the batch-1 decode loop streaming from memory),
// its copy in the Go heap (4 KiB pages) or in the backend's huge-page
// arena, on 1 and 2 threads, and reports GB/s of weights per wall and per
// CPU second.
func BenchmarkHugeRows1(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	const in = 2048
	rb := kernels.Q4_K.RowBytes(in)
	out := (512 << 20) / rb
	r := rand.New(rand.NewPCG(3, 4))
	tile := randBlocks(r, kernels.Q4_K, 1024, in)
	data := make([]byte, out*rb)
	for o := 0; o < len(data); o += len(tile) {
		copy(data[o:], tile)
	}
	x := &kernels.Host{R: 1, C: in, F: randF(r, in)}
	for _, threads := range []int{1, 2} {
		for _, huge := range []bool{false, true} {
			b.Run(fmt.Sprintf("threads=%d/huge=%v", threads, huge), func(b *testing.B) {
				be := New(Options{Threads: threads, QuantizeActivations: true})
				defer be.Close()
				be.noHuge = !huge
				w, err := kernels.NewHostWeight(kernels.Q4_K, out, in, data)
				if err != nil {
					b.Fatal(err)
				}
				if err := be.PrepareMatMul(w, false); err != nil || !w.Repacked {
					b.Fatal("no repack")
				}
				y := be.Alloc(1, out)
				be.MatMul(y, x, w, 1)
				var cpu time.Duration
				b.ResetTimer()
				for b.Loop() {
					c0 := processCPU()
					be.MatMul(y, x, w, 1)
					cpu += processCPU() - c0
				}
				gb := float64(len(data)) * float64(b.N) / 1e9
				b.ReportMetric(gb/b.Elapsed().Seconds(), "GB/s")
				b.ReportMetric(gb/cpu.Seconds(), "GB/cpu-s")
			})
		}
	}
}
