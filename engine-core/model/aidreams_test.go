package model

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/sluice-llm/sluice/internal/testenv"
	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
)

type refRun struct {
	PromptIDs    []int32   `json:"prompt_ids"`
	GeneratedIDs []int32   `json:"generated_ids"`
	Steps        int       `json:"steps"`
	MaxLogit     []float64 `json:"max_logit_by_pos"`
}

func loadRef(t *testing.T) refRun {
	t.Helper()
	b, err := os.ReadFile(testenv.SharedFile(t, "reference-outputs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Runs []refRun `json:"runs"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	return ref.Runs[0]
}

// greedySolo runs prompt through m one sequence at a time (the whole
// prompt as one prefill, then one token per step) and returns the greedy
// continuation and the max logit at every position from the last prompt
// token on.
func greedySolo(t *testing.T, m *Model, prompt []int32, steps int) ([]int32, []float32) {
	t.Helper()
	const bs = 16
	nb := (steps + bs - 1) / bs
	kv := m.NewKVCache(nb, bs)
	s := m.NewScratch(len(prompt), 1)
	table := make([]int32, nb)
	for i := range table {
		table[i] = int32(nb - 1 - i) // scrambled on purpose
	}
	toks := append([]int32(nil), prompt...)
	var gen []int32
	var maxes []float32
	start := 0
	for {
		chunk := toks[start:]
		b := &Batch{Tokens: chunk, OutRows: []int32{int32(len(chunk) - 1)}}
		for i := range chunk {
			p := int32(start + i)
			b.Pos = append(b.Pos, p)
			b.Attn.Slots = append(b.Attn.Slots, table[p/bs]*bs+p%bs)
		}
		b.Attn.QStart = []int32{0, int32(len(chunk))}
		b.Attn.CtxLen = []int32{int32(len(toks))}
		b.Attn.Tables = table
		b.Attn.TableStart = []int32{0, int32(len(table))}
		b.Attn.BlockSize = bs
		logits, err := m.Forward(s, kv, b)
		if err != nil {
			t.Fatal(err)
		}
		best := 0
		for i, v := range logits {
			if v > logits[best] {
				best = i
			}
		}
		maxes = append(maxes, logits[best])
		start = len(toks)
		toks = append(toks, int32(best))
		gen = append(gen, int32(best))
		if best == 1 || len(toks) > steps {
			break
		}
	}
	return gen, maxes
}

func TestAidreamsGreedy(t *testing.T) {
	ref := loadRef(t)
	for _, file := range []string{"aidreams260K/aidreams260K.bin", "aidreams260K/aidreams260K-f32.gguf"} {
		for name, be := range map[string]kernels.Backend{"ref": kernels.NewRef(), "cpu": cpu.New(cpu.Options{Threads: 2})} {
			t.Run(file+"/"+name, func(t *testing.T) {
				m, err := Load(testenv.SharedFile(t, file), be, LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				gen, maxes := greedySolo(t, m, ref.PromptIDs, ref.Steps)
				if len(gen) != len(ref.GeneratedIDs) {
					t.Errorf("generated %d tokens, want %d", len(gen), len(ref.GeneratedIDs))
				}
				for i := range min(len(gen), len(ref.GeneratedIDs)) {
					if gen[i] != ref.GeneratedIDs[i] {
						t.Fatalf("token %d: got %d want %d (got %v)", i, gen[i], ref.GeneratedIDs[i], gen)
					}
				}
				off := len(ref.PromptIDs) - 1
				for i, mx := range maxes {
					want := ref.MaxLogit[off+i]
					if d := float64(mx) - want; d > 1e-4 || d < -1e-4 {
						t.Errorf("pos %d: max logit %v, want %v", off+i, mx, want)
					}
				}
			})
		}
	}
}
