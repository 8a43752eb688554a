package cpu

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// BenchmarkTileWhere runs the Q4_K and Q6_K ×8 tiles on one thread in the
// patterns that separate where the model's tiles lose against the tile in
// L1 (docs/bench/batch-tiles.md, "Where the ×8 tile loses"):
//
//   - l1: one weight row against one group of 8 activation rows, over and
//     over (BenchmarkTileL1's x8 case);
//   - block-act1: qTiles' blocks of weight rows, but every block meets the
//     same group of 8 activation rows (activations in L1, weights streamed
//     once per block as in the model);
//   - qtiles: qTiles itself over all rows on one thread (the model's
//     pattern: each block of weight rows meets every group of 8 rows, whose
//     activations come from L2);
//
// at 16 and 128 activation rows and reductions of 2048 and 8192 values;
// old runs the tiles as before qtilek.go (Q4_K: dotQ4Kx8AVX2, the rows'
// 32-value sums formed per call), new as now.
// GMAC/cpu-s counts multiply-adds per CPU-second.
func BenchmarkTileWhere(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 21))
	for _, dt := range []kernels.DType{kernels.Q4_K, kernels.Q6_K} {
		for _, sh := range []struct{ out, in int }{{2048, 2048}, {512, 8192}} {
			for _, n := range []int{16, 128} {
				data := randBlocks(r, dt, sh.out, sh.in)
				w, err := kernels.NewHostWeight(dt, sh.out, sh.in, data)
				if err != nil {
					b.Fatal(err)
				}
				x := &kernels.Host{R: n, C: sh.in, F: randF(r, n*sh.in)}
				t := &qmatTask{k: kern{avx2: true}, out: &kernels.Host{R: n, C: sh.out, F: make([]float32, n*sh.out)}, x: x, w: w, n: n}
				_, blk := quantized(dt)
				t.act.quantize(t.k, x.F, sh.in, n, sh.in, blk)
				rows := max(1, qTileL1/dt.RowBytes(sh.in))
				if n < qTileMinRows {
					rows = min(rows, qTileFewRows)
				}
				cases := []struct {
					name string
					f    func()
					macs int
				}{
					{"l1", func() {
						var acc [8]float32
						for o := 0; o < 64; o++ {
							t.tile8(0, 0, &acc)
						}
					}, 64 * 8 * sh.in},
					{"block-act1", func() {
						for ob := 0; ob < sh.out; ob += rows {
							for m := 0; m < n; m += 8 {
								t.rows8(ob, min(ob+rows, sh.out), 0)
							}
						}
					}, n * sh.out * sh.in},
					{"qtiles", func() { t.qTiles(0, sh.out) }, n * sh.out * sh.in},
				}
				bp := t.act.bp
				for _, c := range cases {
					for _, v := range []string{"old", "new"} {
						b.Run(fmt.Sprintf("%v/%dx%d/n%d/%s/%s", dt, sh.out, sh.in, n, c.name, v), func(b *testing.B) {
							t.act.bp = bp
							if v == "old" {
								t.act.bp = nil
							}
							runtime.GC()
							b.ResetTimer()
							c0 := processCPU()
							for i := 0; i < b.N; i++ {
								c.f()
							}
							if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
								b.ReportMetric(float64(c.macs)*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
							}
						})
					}
				}
			}
		}
	}
}
