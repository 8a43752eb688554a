package tokenizer

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// threadCPU returns the CPU time consumed by the calling OS thread.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD (Linux)
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter reports throughput per CPU-second of the benchmark's own thread
// ("cpu-MB/s"), which stays meaningful on a shared, overloaded machine
// where wall-clock MB/s does not.
type cpuMeter struct {
	start time.Duration
}

func startCPU() cpuMeter {
	runtime.LockOSThread()
	return cpuMeter{threadCPU()}
}

func (c cpuMeter) report(b *testing.B, bytesPerOp int) {
	used := threadCPU() - c.start
	runtime.UnlockOSThread()
	if used > 0 {
		b.ReportMetric(float64(bytesPerOp)*float64(b.N)/used.Seconds()/1e6, "cpu-MB/s")
	}
}

// BenchmarkEncode measures encode throughput on ~1 MB of mixed text (prose,
// code, digits, Unicode) on one goroutine. "warm" reuses the piece cache
// (steady state of a server); "cold" starts each iteration with an empty
// cache.
func BenchmarkEncode(b *testing.B) {
	text := mixedText(1<<20, 42)
	for _, bc := range []struct{ name, rel string }{
		{"llama3", "tokenizers/llama3/tokenizer.json"},
		{"qwen3", "tokenizers/qwen3/tokenizer.json"},
		{"gpt2", "tokenizers/llama-cpp-vocab/ggml-vocab-gpt-2.gguf"},
		{"llama2-spm", "tokenizers/llama2-sentencepiece/tokenizer.bin"},
	} {
		m := loadFixture(b, bc.rel)
		dst := make([]int32, 0, len(text))
		b.Run(bc.name+"/warm", func(b *testing.B) {
			dst = m.AppendEncode(dst[:0], text, Options{})
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				dst = m.AppendEncode(dst[:0], text, Options{})
			}
			cpu.report(b, len(text))
			b.ReportMetric(float64(len(dst)), "tokens")
		})
		b.Run(bc.name+"/cold", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			var used time.Duration
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for b.Loop() {
				b.StopTimer()
				m.cache = newPieceCache()
				b.StartTimer()
				t0 := threadCPU()
				dst = m.AppendEncode(dst[:0], text, Options{})
				used += threadCPU() - t0
			}
			if used > 0 {
				b.ReportMetric(float64(len(text))*float64(b.N)/used.Seconds()/1e6, "cpu-MB/s")
			}
		})
	}
}

// BenchmarkDecode measures Decode throughput (output bytes per second).
func BenchmarkDecode(b *testing.B) {
	text := mixedText(1<<20, 42)
	m := loadFixture(b, "tokenizers/llama3/tokenizer.json")
	ids := m.EncodeWith(text, Options{})
	b.SetBytes(int64(len(text)))
	cpu := startCPU()
	for b.Loop() {
		_ = m.Decode(ids, false)
	}
	cpu.report(b, len(text))
}
