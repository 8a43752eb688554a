package runner

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/modelfile/demo"
)

// The benchmarks run on generated random-weight models with the stories15M
// and stories110M shapes (speed depends only on shape); the first run
// generates them into the user cache. Each reports tokens per second.

// cpuTime returns the CPU time (user + system, all threads) the process
// has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report adds tok/s (wall clock) and cpu-ms/tok (CPU time of all threads
// per token, which stays meaningful when other processes share the cores).
func report(b *testing.B, tokens int, cpu0 time.Duration) {
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/1e6/float64(tokens), "cpu-ms/tok")
}

func benchModel(b *testing.B, shape, format string) string {
	b.Helper()
	p, err := demo.EnsureCachedAs(shape, 0, format)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// seqState is one benchmark sequence.
type seqState struct {
	toks  []int32
	done  int
	table []int32
}

// benchBatch prepares nseq sequences with prompts of promptLen tokens,
// block tables big enough for maxLen positions each.
func benchBatch(r *Runner, nseq, promptLen, maxLen int) []*seqState {
	bs := r.Info().BlockSize
	per := (maxLen + bs - 1) / bs
	var ss []*seqState
	for i := 0; i < nseq; i++ {
		s := &seqState{}
		for j := 0; j < promptLen; j++ {
			s.toks = append(s.toks, int32((i*7919+j*104729)%(r.Info().VocabSize-10)+5))
		}
		for k := 0; k < per; k++ {
			s.table = append(s.table, int32(i*per+k))
		}
		ss = append(ss, s)
	}
	return ss
}

// step runs one step over every sequence: all of its uncomputed tokens.
func step(b *testing.B, r *Runner, ss []*seqState, batch *sched.Batch, out []sample.Result) {
	batch.Seqs = batch.Seqs[:0]
	for _, s := range ss {
		batch.Seqs = append(batch.Seqs, sched.SeqWork{Tokens: s.toks[s.done:], StartPos: s.done, BlockTable: s.table,
			Sample: true, In: sample.Input{Params: greedy, History: s.toks, NumPrompt: 1}})
	}
	if err := r.Execute(batch, out); err != nil {
		b.Fatal(err)
	}
	for i, s := range ss {
		s.done = len(s.toks)
		s.toks = append(s.toks, out[i].Token)
	}
}

func openBench(b *testing.B, shape, format string, nseq, maxLen int, kvDType ...string) *Runner {
	b.Helper()
	path := benchModel(b, shape, format)
	bs := 16
	kv := ""
	if len(kvDType) > 0 {
		kv = kvDType[0]
	}
	r, err := New(Config{Model: path, NumBlocks: nseq * ((maxLen + bs - 1) / bs), BlockSize: bs, MaxBatchTokens: max(128, nseq), MaxSeqs: nseq, KVCacheDType: kv, UnifiedKV: true})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkDecode measures decode steps of nseq concurrent sequences, each
// with a 128-token prompt already in the cache (llama-batched-bench's
// setup); tok/s counts every sequence's token.
func BenchmarkDecode(b *testing.B) {
	for _, c := range []struct {
		shape, format string
		nseq          int
		kv            string // KV-cache dtype; "" is the default (float32)
	}{
		{"15m", demo.FormatHF, 1, ""}, {"110m", demo.FormatHF, 1, ""}, {"110m", demo.FormatGGUFQ8_0, 1, ""},
		{"110m", demo.FormatHF, 8, ""}, {"110m", demo.FormatHF, 16, ""}, {"110m", demo.FormatHF, 32, ""},
		{"110m", demo.FormatGGUFQ8_0, 16, ""},
		{"110m", demo.FormatHF, 16, "float16"}, {"110m", demo.FormatHF, 32, "float16"},
	} {
		name := fmt.Sprintf("%s-%s-seqs%d", c.shape, c.format, c.nseq)
		if c.kv != "" {
			name += "-kv" + c.kv
		}
		b.Run(name, func(b *testing.B) {
			const prompt, maxLen = 128, 1024
			r := openBench(b, c.shape, c.format, c.nseq, maxLen, c.kv)
			defer r.Close()
			out := make([]sample.Result, c.nseq)
			batch := &sched.Batch{}
			ss := benchBatch(r, c.nseq, prompt, maxLen)
			step(b, r, ss, batch, out) // prefill
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if len(ss[0].toks) >= maxLen {
					b.StopTimer()
					for _, s := range ss {
						s.toks, s.done = s.toks[:prompt+1], prompt
					}
					b.StartTimer()
				}
				step(b, r, ss, batch, out)
			}
			report(b, b.N*c.nseq, cpu0)
		})
	}
}

// BenchmarkPrefill measures a 128-token prompt computed in one step
// (llama-bench's pp128).
func BenchmarkPrefill(b *testing.B) {
	for _, c := range []struct{ shape, format string }{{"15m", demo.FormatHF}, {"110m", demo.FormatHF}, {"110m", demo.FormatGGUFQ8_0}} {
		b.Run(c.shape+"-"+c.format, func(b *testing.B) {
			const prompt = 128
			r := openBench(b, c.shape, c.format, 1, 256)
			defer r.Close()
			out := make([]sample.Result, 1)
			batch := &sched.Batch{}
			ss := benchBatch(r, 1, prompt, 256)
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				ss[0].toks, ss[0].done = ss[0].toks[:prompt], 0
				step(b, r, ss, batch, out)
			}
			report(b, b.N*prompt, cpu0)
		})
	}
}
