package sample

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/ipc"
)

// BenchmarkSample measures one step of sampling: 256 rows of a 32000-token
// vocabulary.
//
//	go test -run '^$' -bench Sample -benchmem ./engine-core/sample/
func BenchmarkSample(b *testing.B) {
	const rows, V = 256, 32000
	cases := []struct {
		name string
		p    ipc.SamplingParams
	}{
		{"greedy", ipc.SamplingParams{Logprobs: -1}},
		{"temperature", ipc.SamplingParams{Temperature: 0.8, Logprobs: -1}},
		{"top_p", ipc.SamplingParams{Temperature: 0.8, TopP: 0.9, Logprobs: -1}},
		{"top_k_top_p", ipc.SamplingParams{Temperature: 0.8, TopK: 50, TopP: 0.9, Logprobs: -1}},
		{"penalties", ipc.SamplingParams{Temperature: 0, RepetitionPenalty: 1.1, FrequencyPenalty: 0.2, PresencePenalty: 0.2, Logprobs: -1}},
		{"greedy_logprobs5", ipc.SamplingParams{Logprobs: 5}},
	}
	rng := rand.New(rand.NewPCG(1, 1))
	src := make([]float32, rows*V)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * 2)
	}
	hist := make([]int32, 600)
	for i := range hist {
		hist[i] = int32(rng.IntN(V))
	}
	for _, tc := range cases {
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/workers=%d", tc.name, workers), func(b *testing.B) {
				s := New(V)
				s.SetWorkers(workers)
				logits := make([]float32, rows*V)
				in := make([]Input, rows)
				for i := range in {
					in[i] = Input{Params: &tc.p, History: hist, NumPrompt: 500, Seed: uint64(i)}
				}
				out := make([]Result, rows)
				b.ReportAllocs()
				b.SetBytes(int64(rows * V * 4))
				var cpu int64
				for b.Loop() {
					b.StopTimer()
					copy(logits, src) // Sample overwrites its input
					b.StartTimer()
					c0 := cpuNow()
					if err := s.Sample(logits, in, out); err != nil {
						b.Fatal(err)
					}
					cpu += cpuNow() - c0
				}
				reportCPU(b, cpu)
			})
		}
	}
}

// BenchmarkSampleRow measures one 32000-logit row held in cache, separating
// the sampler's arithmetic from the memory traffic of a full step. Each
// iteration first restores the row (Sample overwrites it); "copy" measures
// that alone.
//
//	go test -run '^$' -bench SampleRow -cpu 1 ./engine-core/sample/
func BenchmarkSampleRow(b *testing.B) {
	const V = 32000
	rng := rand.New(rand.NewPCG(1, 1))
	src := make([]float32, V)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * 2)
	}
	cases := []struct {
		name string
		p    ipc.SamplingParams
	}{
		{"greedy", ipc.SamplingParams{Logprobs: -1}},
		{"temperature", ipc.SamplingParams{Temperature: 0.8, Logprobs: -1}},
		{"top_p", ipc.SamplingParams{Temperature: 0.8, TopP: 0.9, Logprobs: -1}},
		{"top_k", ipc.SamplingParams{Temperature: 0.8, TopK: 50, Logprobs: -1}},
		{"top_k_top_p", ipc.SamplingParams{Temperature: 0.8, TopK: 50, TopP: 0.9, Logprobs: -1}},
		{"greedy_logprobs5", ipc.SamplingParams{Logprobs: 5}},
	}
	row := make([]float32, V)
	b.Run("copy", func(b *testing.B) {
		c0 := cpuNow()
		for b.Loop() {
			copy(row, src)
		}
		reportCPU(b, cpuNow()-c0)
	})
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			w := newWorker(V)
			in := Input{Params: &tc.p, Seed: 1}
			var res Result
			ids, lps := make([]int32, 0, MaxTopLogprobs), make([]float32, 0, MaxTopLogprobs)
			c0 := cpuNow()
			for b.Loop() {
				copy(row, src)
				w.sampleRow(row, &in, &res, ids, lps)
			}
			reportCPU(b, cpuNow()-c0)
		})
	}
}

// reportCPU reports the CPU time used per iteration (user + system, all
// threads), which oversubscription inflates far less than wall time.
func reportCPU(b *testing.B, ns int64) {
	if ns > 0 && b.N > 0 {
		b.ReportMetric(float64(ns)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkKernels measures each vectorised pass over one cache-resident
// 32000-entry row.
//
//	go test -run '^$' -bench Kernels -cpu 1 ./engine-core/sample/
func BenchmarkKernels(b *testing.B) {
	const V = 32000
	rng := rand.New(rand.NewPCG(1, 1))
	row := make([]float32, V)
	for i := range row {
		row[i] = float32(rng.NormFloat64() * 2)
	}
	w := newWorker(V)
	w.expRow(w.e, row, 1.25, expLo)
	b.Run("max", func(b *testing.B) {
		for b.Loop() {
			rowMax(row)
		}
	})
	b.Run("argmax", func(b *testing.B) {
		for b.Loop() {
			argmax(row)
		}
	})
	b.Run("exp", func(b *testing.B) {
		for b.Loop() {
			w.expRow(w.e, row, 1.25, expLo)
		}
	})
	b.Run("massCount2", func(b *testing.B) {
		for b.Loop() {
			for a := 0; a < V; a += chunk {
				massCount2(w.e[a:min(a+chunk, V)], 0.01, 0.02, &w.mc)
			}
		}
	})
	b.Run("compress_band", func(b *testing.B) {
		for b.Loop() {
			compress(w.e, 0, 0.01, 0.011, w.idx, w.val)
		}
	})
	b.Run("sample_sort", func(b *testing.B) {
		for b.Loop() {
			q := w.sample[:]
			for j := range q {
				q[j] = w.e[j*(V/sampleSize)]
			}
			sortCoarse(q, &w.keys)
		}
	})
}
