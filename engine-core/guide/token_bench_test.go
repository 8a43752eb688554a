package guide

import (
	"encoding/json"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/constraint"
	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/modelfile/demo"
	"github.com/sluice-llm/sluice/text/tokenizer"
)

// benchListSchema is the schema of the end-to-end structured-output
// throughput benchmark (api-frontend/e2etest): far longer than 128 tokens.
const benchListSchema = `{"type":"object","properties":{"items":{"type":"array","minItems":40,"maxItems":40,"items":{"type":"object","properties":{"id":{"type":"integer"},"label":{"type":"string","maxLength":30},"ok":{"type":"boolean"}},"required":["id","label","ok"]}}},"required":["items"]}`

// demoTinyVocab returns the vocabulary of the demo tiny model (512 ids,
// byte-level BPE), the model of the end-to-end benchmark.
func demoTinyVocab(b *testing.B) *Vocab {
	b.Helper()
	dir, err := demo.EnsureCached("tiny", 0)
	if err != nil {
		b.Skipf("demo model: %v", err)
	}
	tok, err := tokenizer.Load(dir, "")
	if err != nil {
		b.Fatalf("load demo tokenizer: %v", err)
	}
	v, err := FromTokenizer(tok, tok.Info().EOSIDs...)
	if err != nil {
		b.Fatalf("demo vocabulary: %v", err)
	}
	return v
}

// BenchmarkConstrainedToken is the engine's per-token cost of structured
// outputs as the engine loop pays it: 64 requests decode together under
// the e2e benchmark's json_schema on the demo tiny vocabulary; each step
// computes every row's mask, samples the 64 rows in one Sample call
// (temperature 1, random logits) and accepts the sampled tokens. A request
// restarts (Rollback to the start) after 128 tokens or at EOS. The "plain"
// case is the same step without constraint; ns/token of "json" minus
// "plain" is the constraint's cost per token; "guide" is Mask and Accept
// alone (the sampled token is picked from the mask without sampling).
// These cases must allocate nothing. "json-newreq" starts each request
// with a new matcher from the compiler's cache (Compiler.Matcher and
// NewBitmask, as the engine does at ADD), so it includes the per-request
// cost spread over the request's tokens. The "-cold" cases stream 8 MiB
// through the cache between steps (untimed), as the forward pass does.
func BenchmarkConstrainedToken(b *testing.B) {
	const rows, maxTokens, nLogits = 64, 128, 97
	v := demoTinyVocab(b)
	V := v.Size()
	ct, err := constraint.JSONSchema(json.RawMessage(benchListSchema), true)
	if err != nil {
		b.Fatal(err)
	}
	c := NewCompiler(v, 64)
	rng := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, nLogits*V)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 2)
	}
	// The forward pass between two steps evicts the caches; the "-cold"
	// cases model it by streaming through evict (outside the timing).
	evict := make([]int64, 8<<20/8)
	for _, name := range []string{"plain", "json", "guide", "json-newreq", "plain-cold", "json-cold", "guide-cold"} {
		mode, cold := strings.CutSuffix(name, "-cold")
		b.Run(name, func(b *testing.B) {
			ms := make([]*Matcher, rows)
			masks := make([]*Bitmask, rows)
			hist := make([][]int32, rows)
			params := make([]ipc.SamplingParams, rows)
			in := make([]sample.Input, rows)
			out := make([]sample.Result, rows)
			for i := range ms {
				ms[i] = mustMatcher(b, c, ct)
				masks[i] = NewBitmask(V)
				hist[i] = make([]int32, 1, 1+maxTokens)
				params[i] = ipc.SamplingParams{Temperature: 1, Logprobs: -1}
			}
			smp := sample.New(V)
			scratch := make([]float32, rows*V)
			guided := mode != "plain"
			sampled := mode != "guide"
			step := 0
			// warm the mask caches and automata
			run := func(n int) {
				for range n {
					for i, m := range ms {
						if guided {
							m.Mask(masks[i])
						}
						in[i] = sample.Input{Params: &params[i], History: hist[i], NumPrompt: 1, Seed: uint64(i)}
						if mode != "plain" {
							in[i].Mask = masks[i]
						}
						src := (step*rows + i*7) % nLogits
						copy(scratch[i*V:(i+1)*V], logits[src*V:(src+1)*V])
					}
					if sampled {
						if err := smp.Sample(scratch, in, out); err != nil {
							b.Fatal(err)
						}
					} else {
						for i := range out {
							// A deterministic allowed token: the k-th allowed id.
							out[i].Token = nthAllowed(masks[i], step+i)
						}
					}
					for i, m := range ms {
						tok := out[i].Token
						restart := len(hist[i]) > maxTokens
						if guided {
							if err := m.Accept(tok); err != nil {
								b.Fatalf("row %d step %d: %v", i, step, err)
							}
							restart = restart || m.IsDone()
						}
						hist[i] = append(hist[i], tok)
						if restart {
							switch mode {
							case "json-newreq":
								// As the engine does: a new matcher and
								// mask per request.
								ms[i] = mustMatcher(b, c, ct)
								masks[i] = NewBitmask(V)
							case "json", "guide":
								if err := m.Rollback(m.Accepted()); err != nil {
									b.Fatal(err)
								}
							}
							hist[i] = hist[i][:1]
						}
					}
					step++
					if cold {
						b.StopTimer()
						for j := range evict {
							evict[j]++
						}
						b.StartTimer()
					}
				}
			}
			run(4 * maxTokens)
			b.ReportAllocs()
			b.ResetTimer()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			start := threadCPU()
			run(b.N)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/token")
			if !cold { // the eviction pass runs on this thread too
				b.ReportMetric(float64(threadCPU()-start)/float64(b.N*rows), "cpu-ns/token")
			}
		})
	}
}

// nthAllowed returns the (k mod count)-th allowed id of mask.
func nthAllowed(mask *Bitmask, k int) int32 {
	n := mask.Count()
	if n == 0 {
		return 0
	}
	k %= n
	for w, word := range mask.Words() {
		for word != 0 {
			if k == 0 {
				return int32(w*64 + trailingZeros(word))
			}
			k--
			word &= word - 1
		}
	}
	return 0
}
