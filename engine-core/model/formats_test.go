package model

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/sluice-llm/sluice/internal/testenv"
	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
	"github.com/sluice-llm/sluice/modelfile/demo"
	"github.com/sluice-llm/sluice/modelfile/llama2c"
)

// exportHF converts a llama2.c checkpoint to a Hugging Face directory with
// llama2c.ExportHF (q/k rows permuted to rotate-half RoPE).
func exportHF(t *testing.T, path string) string {
	t.Helper()
	dir := t.TempDir()
	if err := llama2c.ExportHF(path, dir); err != nil {
		t.Fatal(err)
	}
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
