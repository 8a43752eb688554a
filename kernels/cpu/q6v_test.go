package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// q6TNVariant names one kernel choice of the Q6_K transposed tile.
type q6TNVariant struct {
	name string
	vnni bool // dotQ6KTxNVNNI for pairs of weight rows
	k4v  bool // through MatMul: k4v's tiles on actQ.kv (q6kv.go)
}

// q6TNVariants returns the variants this machine runs: the AVX2 tile
// always, the VNNI one where AVX512_VNNI is present, and k4v's tiles on
// actQ.kv where AVX512_VBMI is too (MatMul only; direct calls of q6TxN
// run the VNNI tile for it).
func q6TNVariants() []q6TNVariant {
	v := []q6TNVariant{{"avx2", false, false}}
	if hasVNNI {
		v = append(v, q6TNVariant{"vnni", true, false})
	}
	if hasK4V {
		v = append(v, q6TNVariant{"kv", true, true})
	}
	return v
}

// BenchmarkQ6TileTNVNNI compares the Q6_K transposed tile on AVX2
// (dotQ6KTxNAVX2, "avx2") with its VNNI twin (dotQ6KTxNVNNI, "vnni"),
// alternated within each iteration so both see the same load, through
// rowsQ6TN on one thread: weights in L2 (64×2048, 105 KiB) and from
// memory (a Q6_K 1B file's 2048×8192 and 8192×2048, and a Q4_K_M file's
// output projection 32000×2048), 16 and 128 activation rows. Metrics:
// multiply-adds and weight bytes per CPU-second of each.
func BenchmarkQ6TileTNVNNI(b *testing.B) {
	if !hasVNNI {
		b.Skip("no AVX512_VNNI kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 29))
	for _, sh := range []struct{ out, in int }{{64, 2048}, {2048, 8192}, {8192, 2048}, {32000, 2048}} {
		data := randBlocks(r, kernels.Q6_K, sh.out, sh.in)
		w, err := kernels.NewHostWeight(kernels.Q6_K, sh.out, sh.in, data)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{16, 128} {
			x := &kernels.Host{R: n, C: sh.in, F: randF(r, n*sh.in)}
			t := &qmatTask{k: kern{avx2: true}, out: &kernels.Host{R: n, C: sh.out, F: make([]float32, n*sh.out)}, x: x, w: w, n: n}
			t.act.quantize(t.k, x.F, sh.in, n, sh.in, 256)
			span := max(8, qTileL2/sh.in&^7)
			var acc [ktnRows * ktnGroups * 16]float32
			run := func(vnni bool) {
				t.k.vnni = vnni
				for m0 := 0; m0 < n; m0 += span {
					for ob := 0; ob < sh.out; ob += ktnRows {
						t.rowsQ6TN(ob, min(ob+ktnRows, sh.out), m0, min(m0+span, n), &acc)
					}
				}
			}
			b.Run(fmt.Sprintf("%dx%d/n%d", sh.out, sh.in, n), func(b *testing.B) {
				var cpu [2]float64
				for i := 0; i < b.N; i++ {
					for v := range cpu {
						c0 := processCPU()
						run(v == 1)
						cpu[v] += (processCPU() - c0).Seconds()
					}
				}
				for v, name := range []string{"avx2", "vnni"} {
					b.ReportMetric(float64(n*sh.out*sh.in)*float64(b.N)/cpu[v]/1e9, name+"-GMAC/cpu-s")
					b.ReportMetric(float64(len(data))*float64(b.N)/cpu[v]/1e9, name+"-GB/cpu-s")
				}
			})
		}
	}
}

// BenchmarkQ6Tile8VNNI compares, at 8 and 12 activation rows (one group
// of 8, the rest left to the ×4 tiles either way), the AVX2 ×8 tile
// (rows8: dotQ6Kx8AVX2 over blocks of qTileFewRows weight rows, "x8") with
// the VNNI transposed tile (rowsQ6TN: dotQ6KTxNVNNI over blocks of
// ktnRows, "tnv"), alternated within each iteration, on one thread:
// weights in L2 (64×2048) and from memory (2048×2048, 2048×8192,
// 8192×2048). Metrics: multiply-adds per CPU-second of each.
func BenchmarkQ6Tile8VNNI(b *testing.B) {
	if !hasVNNI {
		b.Skip("no AVX512_VNNI kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 31))
	for _, sh := range []struct{ out, in int }{{64, 2048}, {2048, 2048}, {2048, 8192}, {8192, 2048}} {
		data := randBlocks(r, kernels.Q6_K, sh.out, sh.in)
		w, err := kernels.NewHostWeight(kernels.Q6_K, sh.out, sh.in, data)
		if err != nil {
			b.Fatal(err)
		}
		const n = 8
		x := &kernels.Host{R: n, C: sh.in, F: randF(r, n*sh.in)}
		t := &qmatTask{k: kern{avx2: true, vnni: true}, out: &kernels.Host{R: n, C: sh.out, F: make([]float32, n*sh.out)}, x: x, w: w, n: n}
		t.act.quantize(t.k, x.F, sh.in, n, sh.in, 256)
		var acc [ktnRows * ktnGroups * 16]float32
		rows := min(max(1, qTileL1/w.DT.RowBytes(sh.in)), qTileFewRows)
		run := func(tn bool) {
			if tn {
				for ob := 0; ob < sh.out; ob += ktnRows {
					t.rowsQ6TN(ob, min(ob+ktnRows, sh.out), 0, n, &acc)
				}
				return
			}
			for ob := 0; ob < sh.out; ob += rows {
				t.rows8(ob, min(ob+rows, sh.out), 0)
			}
		}
		b.Run(fmt.Sprintf("%dx%d", sh.out, sh.in), func(b *testing.B) {
			var cpu [2]float64
			for i := 0; i < b.N; i++ {
				for v := range cpu {
					c0 := processCPU()
					run(v == 1)
					cpu[v] += (processCPU() - c0).Seconds()
				}
			}
			for v, name := range []string{"x8", "tnv"} {
				b.ReportMetric(float64(n*sh.out*sh.in)*float64(b.N)/cpu[v]/1e9, name+"-GMAC/cpu-s")
			}
		})
	}
}
