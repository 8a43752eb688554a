package model

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-llm/sluice/internal/testenv"
	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
	"github.com/sluice-llm/sluice/modelfile/safetensors"
	"github.com/sluice-llm/sluice/text/tokenizer"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata goldens from the float64 reference")

// greedyGolden is a greedy continuation computed by the float64 naive
// forward pass (testdata/*-greedy.json).
type greedyGolden struct {
	Model     string  `json:"model"`
	Prompt    string  `json:"prompt"`
	PromptIDs []int32 `json:"prompt_ids"`
	// Steps is the total sequence length greedySolo runs to.
	Steps        int     `json:"steps"`
	GeneratedIDs []int32 `json:"generated_ids"`
	Text         string  `json:"text"`
}

// loadHFFloat64 reads a Hugging Face checkpoint (F32 safetensors) into
// the naive float64 model.
func loadHFFloat64(t *testing.T, dir string) *hfModel {
	t.Helper()
	cb, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	h := &hfModel{cfg: map[string]any{}, w: map[string][]float64{}, dim: map[string][2]int{}}
	if err := json.Unmarshal(cb, &h.cfg); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.cfg["head_dim"]; !ok {
		h.cfg["head_dim"] = float64(h.num("hidden_size") / h.num("num_attention_heads"))
	}
	st, err := safetensors.OpenModel(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, name := range st.Names() {
		b, ti, _, err := st.TensorData(name)
		if err != nil {
			t.Fatal(err)
		}
		if ti.DType != "F32" {
			t.Fatalf("%s: dtype %s, want F32", name, ti.DType)
		}
		f := kernels.BytesToF32(b)
		d := make([]float64, len(f))
		for i, v := range f {
			d[i] = float64(v)
		}
		h.w[name] = d
		if len(ti.Shape) == 1 {
			h.dim[name] = [2]int{1, ti.Shape[0]}
		} else {
			h.dim[name] = [2]int{ti.Shape[0], ti.Shape[1]}
		}
	}
	return h
}

// naiveGreedy continues prompt greedily with the float64 forward pass, with
// greedySolo's stopping rule (token 1, or a sequence longer than steps).
func naiveGreedy(h *hfModel, prompt []int32, steps int) []int32 {
	toks := append([]int32(nil), prompt...)
	var gen []int32
	for {
		lg := h.naiveLogits(toks)
		last := lg[len(lg)-1]
		best := 0
		for i, v := range last {
			if v > last[best] {
				best = i
			}
		}
		toks = append(toks, int32(best))
		gen = append(gen, int32(best))
		if best == 1 || len(toks) > steps {
			return gen
		}
	}
}

// TestTiedLMHeadOnly loads tinystories656K, a real trained Llama whose tied
// embedding matrix is stored only as lm_head.weight (issue 23 item 3), and
// checks its greedy text against a float64 reference kept in testdata.
func TestTiedLMHeadOnly(t *testing.T) {
	dir := filepath.Join(testenv.SharedModels(t), "tinystories656K")
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		t.Skipf("SKIP: %s not found", dir)
	}
	golden := filepath.Join("testdata", "tinystories656K-greedy.json")
	tok, err := tokenizer.Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	var want greedyGolden
	if *updateGolden {
		h := loadHFFloat64(t, dir)
		if _, ok := h.w["model.embed_tokens.weight"]; ok {
			t.Fatal("fixture changed: model.embed_tokens.weight is stored")
		}
		// transformers ties the two names to one matrix
		h.w["model.embed_tokens.weight"] = h.w["lm_head.weight"]
		want = greedyGolden{Model: "tinystories656K", Prompt: "Once upon a time, there was a little girl", Steps: 64}
		want.PromptIDs = tok.Encode(want.Prompt, true)
		want.GeneratedIDs = naiveGreedy(h, want.PromptIDs, want.Steps)
		want.Text = tok.Decode(want.GeneratedIDs, true)
		b, _ := json.MarshalIndent(want, "", "  ")
		if err := os.WriteFile(golden, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	} else {
		b, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
	}
	if got := tok.Encode(want.Prompt, true); !equalIDs(got, want.PromptIDs) {
		t.Fatalf("prompt ids %v, golden %v", got, want.PromptIDs)
	}
	for name, be := range map[string]kernels.Backend{"ref": kernels.NewRef(), "cpu": cpu.New(cpu.Options{Threads: 2})} {
		t.Run(name, func(t *testing.T) {
			defer be.Close()
			m, err := Load(dir, be, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if !m.Cfg.Tied {
				t.Fatal("config: want tied embeddings")
			}
			gen, _ := greedySolo(t, m, want.PromptIDs, want.Steps)
			if !equalIDs(gen, want.GeneratedIDs) {
				t.Fatalf("greedy ids\n got %v\nwant %v", gen, want.GeneratedIDs)
			}
			if txt := tok.Decode(gen, true); txt != want.Text {
				t.Fatalf("text %q, want %q", txt, want.Text)
			}
		})
	}
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
