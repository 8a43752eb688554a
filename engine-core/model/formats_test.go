package model

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-llm/sluice/internal/testenv"
	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
	"github.com/sluice-llm/sluice/modelfile/demo"
	"github.com/sluice-llm/sluice/modelfile/llama2c"
	"github.com/sluice-llm/sluice/modelfile/safetensors"
)

// metaToHF permutes q/k rows from the interleaved (Meta, llama2.c) rotary
// layout to Hugging Face's rotate-half layout, as transformers'
// convert_llama_weights_to_hf.py does: row 2j+half of a head becomes row
// half*hd/2+j.
func metaToHF(w []byte, rows, cols, heads int) []byte {
	hd := rows / heads
	rb := cols * 4
	out := make([]byte, len(w))
	for h := 0; h < heads; h++ {
		for j := 0; j < hd/2; j++ {
			for half := 0; half < 2; half++ {
				src := h*hd + 2*j + half
				dst := h*hd + half*hd/2 + j
				copy(out[dst*rb:(dst+1)*rb], w[src*rb:(src+1)*rb])
			}
		}
	}
	return out
}

// exportHF converts a llama2.c checkpoint to a Hugging Face directory.
func exportHF(t *testing.T, path string) string {
	t.Helper()
	f, err := llama2c.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := f.Config
	var ts []safetensors.Tensor
	for _, name := range f.Names() {
		tt, _ := f.Tensor(name)
		data := append([]byte(nil), tt.Data...)
		switch {
		case bytes.HasSuffix([]byte(name), []byte("q_proj.weight")):
			data = metaToHF(data, tt.Rows, tt.Cols, c.Heads)
		case bytes.HasSuffix([]byte(name), []byte("k_proj.weight")):
			data = metaToHF(data, tt.Rows, tt.Cols, c.KVHeads)
		}
		shape := []int{tt.Rows, tt.Cols}
		if tt.Rows == 1 {
			shape = []int{tt.Cols}
		}
		ts = append(ts, safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: data})
	}
	dir := t.TempDir()
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ts, nil); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "model.safetensors"), buf.Bytes(), 0o644)
	cfg, _ := json.Marshal(map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "hidden_size": c.Dim, "intermediate_size": c.HiddenDim,
		"num_hidden_layers": c.Layers, "num_attention_heads": c.Heads, "num_key_value_heads": c.KVHeads,
		"rms_norm_eps": 1e-5, "max_position_embeddings": c.SeqLen, "vocab_size": c.VocabSize,
		"tie_word_embeddings": c.SharedClassifier, "bos_token_id": 1, "eos_token_id": 2,
	})
	os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644)
	return dir
}

// TestAidreamsSafetensorsExport converts the llama2.c checkpoint to HF
// layout (permuting q/k for rotate-half RoPE) and checks that greedy
// decoding still reproduces run.c.
func TestAidreamsSafetensorsExport(t *testing.T) {
	ref := loadRef(t)
	dir := exportHF(t, testenv.SharedFile(t, "aidreams260K/aidreams260K.bin"))
	be := cpu.New(cpu.Options{Threads: 2})
	defer be.Close()
	m, err := Load(dir, be, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Cfg.RopeStyle != kernels.RoPEHalf {
		t.Fatal("HF weights should use rotate-half RoPE")
	}
	gen, _ := greedySolo(t, m, ref.PromptIDs, ref.Steps)
	if len(gen) != len(ref.GeneratedIDs) {
		t.Fatalf("generated %d tokens, want %d", len(gen), len(ref.GeneratedIDs))
	}
	for i := range gen {
		if gen[i] != ref.GeneratedIDs[i] {
			t.Fatalf("token %d: got %d want %d", i, gen[i], ref.GeneratedIDs[i])
		}
	}
}

// TestDemoFormatsAgree loads the same demo model from safetensors, GGUF F32
// (q/k permuted, interleaved RoPE) and GGUF Q8_0 and compares logits.
func TestDemoFormatsAgree(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 2})
	defer be.Close()
	toks := []int32{508, 10, 300, 301, 44, 7, 99, 200, 1, 2, 3, 4, 5, 6, 450, 12}
	var logits [3][][]float32
	for i, format := range []string{demo.FormatHF, demo.FormatGGUF, demo.FormatGGUFQ8_0} {
		dir := t.TempDir()
		if err := demo.Generate(dir, "tiny", 5, format); err != nil {
			t.Fatal(err)
		}
		path := dir
		if format != demo.FormatHF {
			path = filepath.Join(dir, demo.GGUFFile)
		}
		m, err := Load(path, be, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && (m.Cfg.Vocab != 512 || !m.Cfg.Tied || m.Cfg.KVHeads != 2 || m.Cfg.BOS != 508 || len(m.Cfg.EOS) != 2) {
			t.Errorf("demo config %+v", m.Cfg)
		}
		logits[i] = allLogits(t, m, toks, []int{10, 1, 5})
		m.Close()
	}
	var maxAbs, dF32, dQ8 float64
	for p := range logits[0] {
		for j, v := range logits[0][p] {
			maxAbs = math.Max(maxAbs, math.Abs(float64(v)))
			dF32 = math.Max(dF32, math.Abs(float64(logits[1][p][j]-v)))
			dQ8 = math.Max(dQ8, math.Abs(float64(logits[2][p][j]-v)))
		}
	}
	if dF32 > 1e-5*math.Max(1, maxAbs) {
		t.Errorf("GGUF F32 vs safetensors: max diff %g (max |logit| %g)", dF32, maxAbs)
	}
	if dQ8 > 0.02*maxAbs || dQ8 == 0 {
		t.Errorf("GGUF Q8_0 vs safetensors: max diff %g (max |logit| %g)", dQ8, maxAbs)
	}
}
