package model

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
)

// BenchmarkMoEFileDecode loads each model file in $SLUICE_BENCH_MOE
// (colon-separated; e.g. `engine-core gen-model --shape gpt-oss-20b
// --format gguf-mxfp4`) on the CPU backend and times one-sequence decode
// steps (the model's Forward, no runner), reporting tok/s, CPU-ms per
// token, the resident set after load and after decoding, and the file's
// weight bytes.
func BenchmarkMoEFileDecode(b *testing.B) {
	env := os.Getenv("SLUICE_BENCH_MOE")
	if env == "" {
		b.Skip("SKIP: set SLUICE_BENCH_MOE to model files (engine-core gen-model writes them)")
	}
	for _, path := range strings.Split(env, ":") {
		b.Run(filepath.Base(filepath.Dir(path)), func(b *testing.B) {
			rss0 := rssBytes(b)
			be := cpu.New(cpu.Options{})
			defer be.Close()
			m, err := Load(path, be, LoadOptions{MaxPos: 1024})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			rssLoad := rssBytes(b) - rss0
			const bs = 16
			kv := m.NewKVCache(1024/bs, bs)
			s := m.NewScratch(1, 1)
			table := make([]int32, 1024/bs)
			for i := range table {
				table[i] = int32(i)
			}
			batch := &Batch{Tokens: []int32{1}, Pos: []int32{0}, OutRows: []int32{0},
				Attn: kernels.AttnBatch{QStart: []int32{0, 1}, CtxLen: []int32{1}, Tables: table, TableStart: []int32{0, int32(len(table))}, BlockSize: bs, Slots: []int32{0}}}
			step := func() {
				if _, err := m.Forward(s, kv, batch); err != nil {
					b.Fatal(err)
				}
				p := (batch.Pos[0] + 1) % 1024
				batch.Pos[0], batch.Attn.CtxLen[0], batch.Attn.Slots[0] = p, p+1, p
				batch.Tokens[0] = (batch.Tokens[0]*7919 + 13) % int32(m.Cfg.Vocab)
			}
			step()
			b.ResetTimer()
			cpu0 := benchCPUTime()
			for i := 0; i < b.N; i++ {
				step()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			b.ReportMetric(float64(benchCPUTime()-cpu0)/1e6/float64(b.N), "cpu-ms/tok")
			b.ReportMetric(float64(rssLoad)/1e6, "rss-load-MB")
			b.ReportMetric(float64(rssBytes(b)-rss0)/1e6, "rss-decode-MB")
			b.ReportMetric(float64(m.WeightBytes())/1e6, "weights-MB")
		})
	}
}

// benchCPUTime is the process's user+system CPU time.
func benchCPUTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
