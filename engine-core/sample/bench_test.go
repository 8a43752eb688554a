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
				for b.Loop() {
					b.StopTimer()
					copy(logits, src) // Sample overwrites its input
					b.StartTimer()
					if err := s.Sample(logits, in, out); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSampleRow measures one 32000-logit row held in cache, separating
// the sampler's arithmetic from the memory traffic of a full step.
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
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			w := newWorker(V)
			row := make([]float32, V)
			in := Input{Params: &tc.p, Seed: 1}
			var res Result
			for b.Loop() {
				copy(row, src)
				w.sampleRow(row, &in, &res, nil, nil)
			}
		})
	}
}
