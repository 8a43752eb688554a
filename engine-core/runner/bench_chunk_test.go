package runner

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/engine-core/sched"
)

// BenchmarkPrefillChunks measures the prefill of one long prompt computed
// in chunks of C tokens per step, as the scheduler's
// --long-prefill-token-threshold cuts it, on the model files in
// $SLUICE_BENCH_MODELS: prefill tok/s and CPU-ms per token over the whole
// prompt (attention over the growing context included) and the longest
// step (max-step-ms, the gap a running stream would see). The prompt has
// $SLUICE_BENCH_PROMPT tokens (default 2048); $SLUICE_BENCH_CHUNKS lists
// the chunk sizes (default 128,256,512,1024,2048).
func BenchmarkPrefillChunks(b *testing.B) {
	env := os.Getenv("SLUICE_BENCH_MODELS")
	if env == "" {
		b.Skip("SKIP: set SLUICE_BENCH_MODELS to model files (engine-core gen-model writes them)")
	}
	prompt := 2048
	if v, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_PROMPT")); err == nil && v > 0 {
		prompt = v
	}
	chunks := []int{128, 256, 512, 1024, 2048}
	if v := os.Getenv("SLUICE_BENCH_CHUNKS"); v != "" {
		chunks = chunks[:0]
		for _, f := range strings.Split(v, ",") {
			c, err := strconv.Atoi(f)
			if err != nil || c < 1 {
				b.Fatalf("SLUICE_BENCH_CHUNKS: bad chunk %q", f)
			}
			chunks = append(chunks, c)
		}
	}
	for _, path := range strings.Split(env, ":") {
		name := filepath.Base(filepath.Dir(path)) + "-" + strings.TrimSuffix(filepath.Base(path), ".gguf")
		for _, chunk := range chunks {
			b.Run(name+"/prompt"+strconv.Itoa(prompt)+"/chunk"+strconv.Itoa(chunk), func(b *testing.B) {
				maxLen := prompt + 16
				r, err := New(Config{Model: path, NumBlocks: maxLen/16 + 1, BlockSize: 16, MaxBatchTokens: chunk, MaxSeqs: 1, MaxModelLen: maxLen, UnifiedKV: true})
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				out := make([]sample.Result, 1)
				batch := &sched.Batch{Seqs: make([]sched.SeqWork, 1)}
				s := benchBatch(r, 1, prompt, maxLen)[0]
				var longest time.Duration
				b.ResetTimer()
				cpu0 := cpuTime()
				for i := 0; i < b.N; i++ {
					for start := 0; start < prompt; start += chunk {
						end := min(prompt, start+chunk)
						batch.Seqs[0] = sched.SeqWork{Tokens: s.toks[start:end], StartPos: start, BlockTable: s.table,
							Sample: end == prompt, In: sample.Input{Params: greedy, History: s.toks[:end], NumPrompt: 1}}
						t0 := time.Now()
						if err := r.Execute(batch, out); err != nil {
							b.Fatal(err)
						}
						longest = max(longest, time.Since(t0))
					}
				}
				report(b, b.N*prompt, cpu0)
				b.ReportMetric(float64(longest)/1e6, "max-step-ms")
			})
		}
	}
}
