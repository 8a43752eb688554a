package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// BenchmarkAttentionDecode1B times one decode step's attention at the 1B
// shape (16 layers, 32 query heads on 8 KV heads of 64 values, F16 cache)
// for one sequence of 192 positions in scattered 16-position blocks: the
// batch-1 step's share, where four query heads read the same key and
// value rows.
func BenchmarkAttentionDecode1B(b *testing.B) {
	const ctx, heads, kvHeads, hd, bs, layers = 192, 32, 8, 64, 16, 16
	r := rand.New(rand.NewPCG(5, 6))
	be := New(Options{KVF16: true})
	defer be.Close()
	nb := ctx / bs
	a := &kernels.AttnBatch{QStart: []int32{0, 1}, TableStart: []int32{0, int32(nb)}, BlockSize: bs, CtxLen: []int32{ctx}}
	for _, p := range r.Perm(4 * nb)[:nb] {
		a.Tables = append(a.Tables, int32(p))
	}
	slots := 4 * nb * bs
	type layer struct{ kc, vc kernels.Tensor }
	var ls []layer
	for l := 0; l < layers; l++ {
		kc, vc := be.AllocKV(slots, kvHeads*hd), be.AllocKV(slots, kvHeads*hd)
		for _, c := range []kernels.Tensor{kc, vc} {
			for i, x := range randF(r, slots*kvHeads*hd) {
				c.(*kernels.Host).H[i] = quant.F32ToF16(x)
			}
		}
		ls = append(ls, layer{kc, vc})
	}
	q, o := be.Alloc(1, heads*hd), be.Alloc(1, heads*hd)
	copy(be.ToHost(q, 1), randF(r, heads*hd))
	sh := kernels.AttnShape{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 0.125}
	b.ResetTimer()
	c0 := processCPU()
	for i := 0; i < b.N; i++ {
		for _, l := range ls {
			be.Attention(o, q, l.kc, l.vc, a, sh)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/step")
	b.ReportMetric(float64((processCPU()-c0).Microseconds())/float64(b.N), "cpu-µs/step")
}
