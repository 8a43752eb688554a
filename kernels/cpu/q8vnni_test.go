package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// BenchmarkQ8VNNI times qTiles on a Q8_0 or Q4_0 weight of the 1B model's
// shapes (2048→8192 gate/up, 8192→2048 down) against 16 and 128 activation
// rows, one thread, with the AVX2 tiles (q8tile_amd64.s) and their VNNI
// twins (q8vnni_amd64.s), and the transposed VNNI tiles (T: as qTiles
// runs them, Q8_0's in pairs from 32 rows; T1: Q8_0's one weight row at a
// time; Z: the 4×16 tiles of q8z.go, kern.q8z),
// on the
// same operands, the variants alternated
// within each sub-benchmark's run so that both meet the same load.
// GMAC/cpu-s counts multiply-adds per CPU-second of each variant.
func BenchmarkQ8VNNI(b *testing.B) {
	if !hasVNNI || !hasAVX2 {
		b.Skip("no AVX512_VNNI on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 8))
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0} {
		for _, s := range []struct{ out, in int }{{8192, 2048}, {2048, 8192}} {
			for _, n := range []int{16, 128} {
				b.Run(fmt.Sprintf("%v/%dx%d/n%d", dt, s.out, s.in, n), func(b *testing.B) {
					w, err := kernels.NewHostWeight(dt, s.out, s.in, randBlocks(r, dt, s.out, s.in))
					if err != nil {
						b.Fatal(err)
					}
					x := &kernels.Host{R: n, C: s.in, F: randF(r, n*s.in)}
					t := &qmatTask{k: kern{avx2: true}, x: x, w: w, n: n,
						out: &kernels.Host{R: n, C: s.out, F: make([]float32, n*s.out)}}
					t.act.quantize(t.k, x.F, s.in, n, s.in, 32)
					t.act.transposeQ8()
					t.act.transposeQ16(hasAVX512)
					qt := t.act.qt
					var cpu [5]float32
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						for v := range 5 {
							// avx2; vnni: the ×8 and 2×4 twins; vnniT: the
							// transposed tiles (Q8_0's in pairs from 32 rows)
							if v == 3 && dt == kernels.Q4_0 {
								continue // (Q4_0's has no pairs)
							}
							t.k.vnni, t.k.q8z, t.act.qt = v > 0, v == 4, qt[:0]
							if v == 2 || v == 4 {
								t.act.qt = qt
							}
							c0 := processCPU()
							if v == 3 {
								// the transposed tile one weight row at a time
								t.act.qt = qt
								for ob := 0; ob < s.out; ob += 8 {
									t.rowsQ8TP(ob, min(ob+8, s.out), 0, n, false)
								}
							} else {
								t.qTiles(0, s.out)
							}
							cpu[v] += float32((processCPU() - c0).Seconds())
						}
					}
					mac := float64(n*s.out*s.in) * float64(b.N)
					for v, name := range []string{"avx2", "vnni", "vnniT", "vnniT1", "vnniZ"} {
						if cpu[v] > 0 {
							b.ReportMetric(mac/float64(cpu[v])/1e9, name+"-GMAC/cpu-s")
						}
					}
				})
			}
		}
	}
}
