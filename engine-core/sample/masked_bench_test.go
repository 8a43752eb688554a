package sample

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/ipc"
)

// benchMask is a structured-output mask as engine-core/guide's Bitmask
// presents it: the dense bitset, plus the sorted ids when few are allowed.
type benchMask struct {
	words []uint64
	ids   []int32
}

func (m *benchMask) Allowed(id int32) bool { return m.words[id>>6]&(1<<(uint(id)&63)) != 0 }
func (m *benchMask) AllowedIDs() []int32   { return m.ids }
func (m *benchMask) Words() []uint64       { return m.words }

// newBenchMask allows each id with probability frac (at least one id); the
// id list is kept when at most limit ids are allowed.
func newBenchMask(rng *rand.Rand, V int, frac float64, limit int) *benchMask {
	m := &benchMask{words: make([]uint64, (V+63)/64)}
	for i := range V {
		if rng.Float64() < frac {
			m.words[i>>6] |= 1 << (uint(i) & 63)
		}
	}
	m.words[0] |= 1
	n := 0
	for _, w := range m.words {
		n += bits.OnesCount64(w)
	}
	if n <= limit {
		for i := range V {
			if m.Allowed(int32(i)) {
				m.ids = append(m.ids, int32(i))
			}
		}
	}
	return m
}

// BenchmarkMaskedRow is one row under a structured-output mask: the mask
// applied to the logits, then the draw (temperature 1) or argmax. The
// masks: "sparse" (about 40 ids allowed: inside JSON structure), "half"
// and "most" (all but about 1 %: inside a string). V 512 is the demo tiny
// model of the end-to-end benchmark, 32000 a Llama-2-sized vocabulary.
//
//	go test -run '^$' -bench MaskedRow -cpu 1 ./engine-core/sample/
func BenchmarkMaskedRow(b *testing.B) {
	for _, V := range []int{512, 32000} {
		rng := rand.New(rand.NewPCG(3, 4))
		src := make([]float32, V)
		for i := range src {
			src[i] = float32(rng.NormFloat64() * 2)
		}
		limit := min(max(V/16, 64), 8192) // guide's sparse limit
		masks := []struct {
			name string
			m    *benchMask
		}{
			{"none", nil},
			{"sparse", newBenchMask(rng, V, 40/float64(V), limit)},
			{"half", newBenchMask(rng, V, 0.5, limit)},
			{"most", newBenchMask(rng, V, 0.99, limit)},
		}
		row := make([]float32, V)
		for _, mk := range masks {
			for _, temp := range []float32{0, 1} {
				p := ipc.SamplingParams{Temperature: temp, Logprobs: -1}
				b.Run(fmt.Sprintf("V%d/%s/T%g", V, mk.name, temp), func(b *testing.B) {
					w := newWorker(V)
					in := Input{Params: &p, Seed: 1}
					if mk.m != nil {
						in.Mask = mk.m
					}
					var res Result
					ids, lps := make([]int32, 0, MaxTopLogprobs), make([]float32, 0, MaxTopLogprobs)
					c0 := cpuNow()
					for b.Loop() {
						copy(row, src)
						w.sampleRow(row, &in, &res, ids, lps)
						if mk.m != nil && !mk.m.Allowed(res.Token) {
							b.Fatalf("token %d not allowed", res.Token)
						}
					}
					reportCPU(b, cpuNow()-c0)
				})
			}
		}
	}
}
