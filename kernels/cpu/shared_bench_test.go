package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/kernels"
)

// BenchmarkSharedStep1B alternates, step by step in one process, two ways
// of running the matrix products of one batch-1 decode step of the 1B
// Q4_K_M shape (16 layers of q, k, v, o, gate, up, down; the 32000-row
// output; Q6_K where the file has it): "ops" = one MatMul per weight in
// four equal chunks per thread (the path before MatMulShared), "guided" =
// one MatMul per weight in shrinking chunks (parallelGuided), "shared" =
// q/k/v and gate/up through MatMulShared, in shrinking chunks too (the
// served path). Each group's input changes every step, so
// activations are quantized once per group as in the model. Alternating
// steps meet the same load on a shared machine; the medians of each
// variant's wall and CPU (both threads, spinning included) time per step
// are reported.
func BenchmarkSharedStep1B(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	const layers, dim, kv, ffn, vocab = 16, 2048, 512, 8192, 32000
	r := rand.New(rand.NewPCG(17, 18))
	be := New(Options{QuantizeActivations: true})
	defer be.Close()
	weight := func(dt kernels.DType, out, in int) kernels.Tensor {
		w, err := kernels.NewHostWeight(dt, out, in, randBlocks(r, dt, out, in))
		if err != nil {
			b.Fatal(err)
		}
		return w
	}
	// group is the products of one input: outs[i] = x · ws[i]ᵀ
	type group struct {
		x        *kernels.Host
		ws, outs []kernels.Tensor
	}
	var groups []group
	add := func(in int, dts []kernels.DType, rows []int) {
		g := group{x: &kernels.Host{R: 1, C: in, F: randF(r, in)}}
		for i, dt := range dts {
			g.ws = append(g.ws, weight(dt, rows[i], in))
			g.outs = append(g.outs, be.Alloc(1, rows[i]))
		}
		groups = append(groups, g)
	}
	for l := 0; l < layers; l++ {
		more := kernels.Q4_K
		if useMoreBits(l, layers) {
			more = kernels.Q6_K
		}
		add(dim, []kernels.DType{kernels.Q4_K, kernels.Q4_K, more}, []int{dim, kv, kv}) // q, k, v
		add(dim, []kernels.DType{kernels.Q4_K}, []int{dim})                             // o
		add(dim, []kernels.DType{kernels.Q4_K, kernels.Q4_K}, []int{ffn, ffn})          // gate, up
		add(ffn, []kernels.DType{more}, []int{dim})                                     // down
	}
	add(dim, []kernels.DType{kernels.Q6_K}, []int{vocab}) // output
	ops := func() {
		for _, g := range groups {
			g.x.F[0]++
			for i, w := range g.ws {
				wh := w.(*kernels.Host)
				t := &be.qm
				t.k, t.out, t.x, t.w, t.n = be.k, g.outs[i].(*kernels.Host), g.x, wh, 1
				_, blk := quantized(wh.DT)
				t.act.quantize(be.k, g.x.F, g.x.C, 1, wh.C, blk)
				be.pool.parallel(wh.R, 4, 0, t)
				t.out, t.x, t.w = nil, nil, nil
			}
		}
	}
	shared := func() {
		for _, g := range groups {
			g.x.F[0]++
			be.MatMulShared(g.outs, g.x, g.ws, 1)
		}
	}
	guided := func() {
		for _, g := range groups {
			g.x.F[0]++
			for i, w := range g.ws {
				be.MatMul(g.outs[i], g.x, w, 1)
			}
		}
	}
	names := []string{"ops", "guided", "shared"}
	runs := []func(){ops, guided, shared}
	wall, cpu := make([][]float64, len(runs)), make([][]float64, len(runs))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range runs {
			v := (i + j) % len(runs) // each variant first in turn
			t0, c0 := time.Now(), processCPU()
			runs[v]()
			wall[v] = append(wall[v], float64(time.Since(t0))/1e6)
			cpu[v] = append(cpu[v], float64(processCPU()-c0)/1e6)
		}
	}
	b.StopTimer()
	for v, name := range names {
		b.ReportMetric(median(wall[v]), name+"-ms/step")
		b.ReportMetric(median(cpu[v]), name+"-cpu-ms/step")
	}
}

// median returns the median of xs (sorting xs).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}
