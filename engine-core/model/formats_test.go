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

// TestGeneratedFormatsAgree writes one random model in every GGUF format
// gen-model knows (mixed-type _M files included) for each architecture,
// loads each and compares its logits with the F32 file's: the stored
// encodings decode to what was quantized, within each format's error.
func TestGeneratedFormatsAgree(t *testing.T) {
	base := demo.RealShape{Name: "test", Dim: 256, Hidden: 768, Layers: 4, Heads: 4, KVHeads: 2,
		HeadDim: 64, Vocab: 600, MaxPos: 256, Tied: true, RopeTheta: 10000}
	// ‖Δ logits‖ / ‖logits‖ (a wrong block layout gives about 1.4): each
	// format's figure measured on this test, with a margin of about 1.5×
	tol := map[string]float64{
		demo.FormatGGUFF16: 0.002, demo.FormatGGUFBF16: 0.01, demo.FormatGGUFQ8_0: 0.03,
		demo.FormatGGUFQ6K: 0.1, demo.FormatGGUFQ5KM: 0.2, demo.FormatGGUFQ4KM: 0.4, demo.FormatGGUFQ4_0: 0.4,
	}
	toks := []int32{596, 10, 300, 301, 44, 7, 99, 200, 1, 2, 3, 4}
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			s := base
			s.Arch, s.QKVBias, s.QKNorm = arch, arch == "qwen2", arch == "qwen3"
			be := cpu.New(cpu.Options{Threads: 2})
			defer be.Close()
			logits := func(format string) [][]float32 {
				path := filepath.Join(t.TempDir(), "m.gguf")
				if err := demo.GenerateShape(path, s, 3, format); err != nil {
					t.Fatal(err)
				}
				m, err := Load(path, be, LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				if m.Cfg.Arch != arch || m.Cfg.Vocab != s.Vocab || m.Cfg.HeadDim != s.HeadDim || m.Cfg.QKVBias != s.QKVBias || m.Cfg.QKNorm != s.QKNorm {
					t.Fatalf("%s: config %+v", format, m.Cfg)
				}
				return allLogits(t, m, toks, []int{8, 1, 3})
			}
			want := logits(demo.FormatGGUF)
			for _, format := range []string{demo.FormatGGUFF16, demo.FormatGGUFBF16, demo.FormatGGUFQ8_0,
				demo.FormatGGUFQ6K, demo.FormatGGUFQ5KM, demo.FormatGGUFQ4KM, demo.FormatGGUFQ4_0} {
				got := logits(format)
				var ssw, ssd float64
				for p := range want {
					for j, v := range want[p] {
						ssw += float64(v) * float64(v)
						d := float64(got[p][j] - v)
						ssd += d * d
					}
				}
				rel := math.Sqrt(ssd / ssw)
				if rel > tol[format] || rel == 0 {
					t.Errorf("%s vs F32: ‖Δ logits‖/‖logits‖ = %.4f, tolerance %g", format, rel, tol[format])
				}
				t.Logf("%s vs F32: ‖Δ logits‖/‖logits‖ = %.4f", format, rel)
			}
		})
	}
}
