package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// BenchmarkTileL1 times one ×4 tile call (and, named x8, one ×8 tile
// call)
// on one weight row of 2048 values and 4 (8) activation rows, all in L1,
// on one thread: the kernel's arithmetic alone. GMAC/cpu-s counts multiply-adds per CPU-second.
func BenchmarkTileL1(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	const K = 2048
	r := rand.New(rand.NewPCG(17, 20))
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K} {
		b.Run(dt.String(), func(b *testing.B) {
			data := randBlocks(r, dt, 1, K)
			w, err := kernels.NewHostWeight(dt, 1, K, data)
			if err != nil {
				b.Fatal(err)
			}
			x := &kernels.Host{R: 4, C: K, F: randF(r, 4*K)}
			t := &qmatTask{k: kern{avx2: true}, out: &kernels.Host{R: 4, C: 1, F: make([]float32, 4)}, x: x, w: w, n: 4}
			_, blk := quantized(dt)
			t.act.quantize(t.k, x.F, K, 4, K, blk)
			var acc [4]float32
			b.ResetTimer()
			c0 := processCPU()
			for i := 0; i < b.N; i++ {
				t.tile4(0, 0, 0, K, &acc)
			}
			if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
				b.ReportMetric(4*K*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
			}
		})
		if !has8(dt) {
			continue
		}
		b.Run(dt.String()+"x8", func(b *testing.B) {
			data := randBlocks(r, dt, 1, K)
			w, err := kernels.NewHostWeight(dt, 1, K, data)
			if err != nil {
				b.Fatal(err)
			}
			x := &kernels.Host{R: 8, C: K, F: randF(r, 8*K)}
			t := &qmatTask{k: kern{avx2: true}, out: &kernels.Host{R: 8, C: 1, F: make([]float32, 8)}, x: x, w: w, n: 8}
			_, blk := quantized(dt)
			t.act.quantize(t.k, x.F, K, 8, K, blk)
			var acc [8]float32
			b.ResetTimer()
			c0 := processCPU()
			for i := 0; i < b.N; i++ {
				t.tile8(0, 0, &acc)
			}
			if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
				b.ReportMetric(8*K*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
			}
		})
	}
}
