package model

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/sluice-llm/sluice/internal/testenv"
	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
)

// quantRefTolerance is the largest difference in log-probability allowed
// against llama.cpp's server on its own quantized files, on the CPU
// backend's served configuration (issue 17's bound). It holds because that
// configuration computes as ggml does where rounding happens: activations
// quantized to int8 exactly as ggml's quantize_row_q8_0/q8_K, RMSNorm's
// sum in float64, an F16 KV cache whose queries and probabilities are
// rounded to float16 before their products (see kernels/cpu's package
// doc). The remaining differences come from float32 summation order, which
// now and then moves an int8 or float16 rounding by one step; this random
// model amplifies such a step to a few hundredths (measured: at most 0.06
// with the AVX2 kernels, whose reductions are not ggml's).
const quantRefTolerance = 0.08

// quantRefTolerancePlain is the bound with the plain-Go kernels, which
// also sum in the order of ggml's AVX2 kernels (integer products, F16
// attention, softmax): they reproduce llama.cpp's reference to 4 decimals
// on all five files (measured 0.0000).
const quantRefTolerancePlain = 0.01

// quantRefToleranceRef is the bound for the reference backend (exact F32
// activations and cache): llama.cpp's own rounding moves its
// log-probabilities by up to 0.22 from the exact product on these files.
const quantRefToleranceRef = 0.25

// quantRefMarginRef: a step whose top two llama.cpp log-probabilities are
// closer than this is a near-tie that the reference backend's exact
// arithmetic may resolve differently; the served configuration must choose
// llama.cpp's id at every step.
const quantRefMarginRef = 0.25

// llamaCppRun is one prompt of kq20m-llamacpp-reference.json: what
// llama.cpp's server returned for 8 greedy steps.
type llamaCppRun struct {
	PromptIDs []int32 `json:"prompt_ids"`
	Steps     []struct {
		ChosenID      int32        `json:"chosen_id"`
		ChosenLogprob float64      `json:"chosen_logprob"`
		TopLogprobs   [][2]float64 `json:"top_logprobs"`
	} `json:"steps"`
}

// logSoftmax returns log-probabilities of logits, in float64.
func logSoftmax(logits []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	lse := mx + math.Log(sum)
	out := make([]float64, len(logits))
	for i, v := range logits {
		out[i] = float64(v) - lse
	}
	return out
}

// TestQuantRefAgainstLlamaCpp loads each of llama.cpp's quantized files in
// ../shared/models/quant-ref and checks, at every step of llama.cpp's own
// greedy run (fed the same tokens), the same chosen id and every one of
// its top-10 log-probabilities within quantRefTolerance on the served CPU
// configuration (int8 activations for every block-quantized product and an
// F16 KV cache, as llama.cpp; the runner's "auto" KV type for quantized
// models), with its assembly kernels and with their plain-Go twins. The
// reference backend (exact F32 activations) is checked within the looser
// quantRefToleranceRef, which measures how far llama.cpp's own rounding
// is from the exact product.
func TestQuantRefAgainstLlamaCpp(t *testing.T) {
	dir := filepath.Join(testenv.SharedModels(t), "quant-ref")
	b, err := os.ReadFile(filepath.Join(dir, "kq20m-llamacpp-reference.json"))
	if err != nil {
		t.Skipf("SKIP: llama.cpp reference not found: %v", err)
	}
	var ref struct {
		Files map[string][]llamaCppRun `json:"files"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	var files []string
	for f := range ref.Files {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			files = append(files, f)
		}
	}
	sort.Strings(files)
	if len(files) < 5 {
		t.Fatalf("want the 5 quantized files of the README, found %v", files)
	}
	backends := []struct {
		name        string
		new         func() kernels.Backend
		tol, margin float64
	}{
		{"cpu-served", func() kernels.Backend {
			return cpu.New(cpu.Options{Threads: 2, QuantizeActivations: true, KVF16: true})
		}, quantRefTolerance, 0},
		{"cpu-served-plain", func() kernels.Backend {
			return cpu.New(cpu.Options{Threads: 2, QuantizeActivations: true, KVF16: true, Plain: true})
		}, quantRefTolerancePlain, 0},
		{"ref", func() kernels.Backend { return kernels.NewRef() }, quantRefToleranceRef, quantRefMarginRef},
	}
	for _, file := range files {
		for _, bk := range backends {
			t.Run(file+"/"+bk.name, func(t *testing.T) {
				be := bk.new()
				defer be.Close()
				m, err := Load(filepath.Join(dir, file), be, LoadOptions{MaxPos: 64})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				var maxDiff, maxTop5, maxChosen float64
				for ri, run := range ref.Files[file] {
					toks := append([]int32(nil), run.PromptIDs...)
					chunks := []int{len(run.PromptIDs)}
					for _, st := range run.Steps[:len(run.Steps)-1] {
						toks = append(toks, st.ChosenID)
						chunks = append(chunks, 1)
					}
					lg := allLogits(t, m, toks, chunks)
					for si, st := range run.Steps {
						lp := logSoftmax(lg[len(run.PromptIDs)-1+si])
						best := 0
						for i, v := range lp {
							if v > lp[best] {
								best = i
							}
						}
						margin := st.TopLogprobs[0][1] - st.TopLogprobs[1][1]
						if int32(best) != st.ChosenID && margin >= bk.margin {
							t.Errorf("prompt %d step %d: chose %d (%.4f), llama.cpp %d (%.4f; ours %.4f)",
								ri, si, best, lp[best], st.ChosenID, st.ChosenLogprob, lp[st.ChosenID])
						}
						maxChosen = math.Max(maxChosen, math.Abs(lp[st.ChosenID]-st.ChosenLogprob))
						for k, tl := range st.TopLogprobs {
							id, want := int(tl[0]), tl[1]
							d := math.Abs(lp[id] - want)
							maxDiff = math.Max(maxDiff, d)
							if k < 5 {
								maxTop5 = math.Max(maxTop5, d)
							}
							if d > bk.tol {
								t.Errorf("prompt %d step %d id %d: log-probability %.4f, llama.cpp %.4f (|Δ| %.4f > %.2f)",
									ri, si, id, lp[id], want, d, bk.tol)
							}
						}
					}
				}
				t.Logf("%s on %s: max |Δ log-probability| vs llama.cpp: top-10 %.4f, top-5 %.4f, chosen %.4f",
					file, bk.name, maxDiff, maxTop5, maxChosen)
			})
		}
	}
}
