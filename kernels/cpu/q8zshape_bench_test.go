package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// BenchmarkQ8ZShapes times qTiles, one thread, on Q8_0 and Q4_0 weights of
// real models' shapes (in→out: gpt-oss's attention 2880→4096, 4096→2880,
// 2880→512; Llama-3.1-8B's ffn_down 14336→4096; the 1B's 2048→8192 and
// 8192→2048) against 16 and 128 activation rows, with kern.q8z (Z: the
// 4×16 tiles where takesQ8Z holds) and without (T: the transposed ×8
// tiles), alternated within each run so that both meet the same load.
// cpu-us/op is CPU time per product of the whole weight; the file builds
// on older trees too (it calls qTiles only), so that one binary per tree
// can be alternated.
func BenchmarkQ8ZShapes(b *testing.B) {
	if !hasVNNI || !hasAVX512 {
		b.Skip("no AVX512_VNNI on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 9))
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0} {
		for _, s := range []struct{ in, out int }{{2880, 4096}, {4096, 2880}, {2880, 512}, {14336, 4096}, {2048, 8192}, {8192, 2048}} {
			for _, n := range []int{16, 128} {
				b.Run(fmt.Sprintf("%v/k%d-o%d/n%d", dt, s.in, s.out, n), func(b *testing.B) {
					w, err := kernels.NewHostWeight(dt, s.out, s.in, randBlocks(r, dt, s.out, s.in))
					if err != nil {
						b.Fatal(err)
					}
					x := &kernels.Host{R: n, C: s.in, F: randF(r, n*s.in)}
					t := &qmatTask{k: kern{avx2: true, vnni: true}, x: x, w: w, n: n,
						out: &kernels.Host{R: n, C: s.out, F: make([]float32, n*s.out)}}
					t.act.quantize(kern{avx2: true}, x.F, s.in, n, s.in, 32)
					t.act.transposeQ8()
					t.act.transposeQ16(true)
					var cpu [2]float64
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						for v := range 2 {
							t.k.q8z = v == 1
							c0 := processCPU()
							t.qTiles(0, s.out)
							cpu[v] += (processCPU() - c0).Seconds()
						}
					}
					for v, name := range []string{"T", "Z"} {
						b.ReportMetric(cpu[v]/float64(b.N)*1e6, name+"-cpu-us/op")
					}
				})
			}
		}
	}
}
