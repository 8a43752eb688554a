package runner

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/kernels"
)

// BenchmarkModelFileContext measures the runner's decode step of 16
// sequences of 128 positions and of one sequence at long contexts (1024
// and 4096 positions in the cache), where attention's share of the step is
// largest, on the model files listed in $SLUICE_BENCH_MODELS. The cache is
// filled with random values instead of a prefill (attention's cost does
// not depend on them, a 4096-token prefill would take minutes on a loaded
// machine, and a profile of the benchmark then holds the decode steps
// alone): every cache page is written, so the step reads them from memory
// as after a real prefill. Each step attends to ctx+1 to ctx+32 positions.
func BenchmarkModelFileContext(b *testing.B) {
	env := os.Getenv("SLUICE_BENCH_MODELS")
	if env == "" {
		b.Skip("SKIP: set SLUICE_BENCH_MODELS to model files (engine-core gen-model writes them)")
	}
	for _, path := range strings.Split(env, ":") {
		name := filepath.Base(filepath.Dir(path)) + "-" + strings.TrimSuffix(filepath.Base(path), ".gguf")
		for _, c := range []struct{ nseq, ctx int }{{16, 128}, {1, 1024}, {1, 4096}} {
			nseq, ctx := c.nseq, c.ctx
			b.Run(name+"/decode-seqs"+strconv.Itoa(nseq)+"-ctx"+strconv.Itoa(ctx), func(b *testing.B) {
				const extra = 32
				maxLen := ctx + extra + 16
				r, err := New(Config{Model: path, NumBlocks: nseq * maxLen / 16, BlockSize: 16, MaxBatchTokens: 128 * nseq, MaxSeqs: nseq, MaxModelLen: maxLen, UnifiedKV: true})
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				fillKV(r.kv.K, r.kv.V)
				out := make([]sample.Result, nseq)
				batch := &sched.Batch{}
				ss := benchBatch(r, nseq, ctx, maxLen)
				for _, s := range ss {
					s.done = ctx - 1
				}
				step(b, r, ss, batch, out)
				rec := opStatsOn(r)
				b.ResetTimer()
				cpu0 := cpuTime()
				for i := 0; i < b.N; i++ {
					if len(ss[0].toks) >= ctx+extra {
						for _, s := range ss {
							s.toks, s.done = s.toks[:ctx+1], ctx
						}
					}
					step(b, r, ss, batch, out)
				}
				report(b, b.N*nseq, cpu0)
				if rec != nil {
					reportOps(b, rec, cpu0)
				}
			})
		}
	}
}

// fillKV writes small pseudo-random values into every element of the
// cache tensors (float16 or float32 host tensors).
func fillKV(ts ...[]kernels.Tensor) {
	x := uint32(12345)
	for _, l := range ts {
		for _, t := range l {
			h, ok := t.(*kernels.Host)
			if !ok {
				continue
			}
			for i := range h.H {
				x = x*1664525 + 1013904223
				h.H[i] = uint16(0x2c00 | x>>22 | (x>>16)&0x8000) // ±[1/16, 1/8)
			}
			for i := range h.F {
				x = x*1664525 + 1013904223
				h.F[i] = float32(int32(x>>8)-1<<23) / (1 << 26)
			}
		}
	}
}
