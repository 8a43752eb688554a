package model

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
	"github.com/sluice-llm/sluice/modelfile/demo"
)

// noSiLUMM is the CPU backend without kernels.SiLUMulMatMuler: its
// SiLUMulMatMul is ambiguous between the two embedded fields, so it is
// not promoted and the model takes SiLUMul then MatMul.
type noSiLUMM struct {
	*cpu.Backend
	siluHider
}

// siluHider only hides cpu.Backend.SiLUMulMatMul (see noSiLUMM).
type siluHider struct{}

func (siluHider) SiLUMulMatMul(out, gate, up, w kernels.Tensor, n int) { panic("hidden") }

// TestSiLUMulMatMulStepLogits checks whole forward passes of F16 and BF16
// models (batches of 16, 13, 8, 2 and 1 rows: the fused panel path and
// the sizes beside it) bit for bit against the same backend without
// SiLUMulMatMul: the logits of every row are the unfused path's.
func TestSiLUMulMatMulStepLogits(t *testing.T) {
	s := demo.RealShape{Name: "test", Arch: "llama", Dim: 256, Hidden: 768, Layers: 3, Heads: 4, KVHeads: 2,
		HeadDim: 64, Vocab: 600, MaxPos: 256, Tied: true, RopeTheta: 10000}
	toks := make([]int32, 40)
	for i := range toks {
		toks[i] = int32((i*37 + 11) % s.Vocab)
	}
	chunks := []int{16, 13, 8, 2, 1}
	for _, format := range []string{demo.FormatGGUFF16, demo.FormatGGUFBF16} {
		t.Run(format, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := demo.GenerateShape(path, s, 5, format); err != nil {
				t.Fatal(err)
			}
			be := cpu.New(cpu.Options{Threads: 2})
			defer be.Close()
			m, err := Load(path, be, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if _, ok := m.be.(kernels.SiLUMulMatMuler); !ok {
				t.Fatal("the cpu backend does not fuse SiLUMul and MatMul")
			}
			got := allLogits(t, m, toks, chunks)
			m.be = noSiLUMM{Backend: be}
			if _, ok := m.be.(kernels.SiLUMulMatMuler); ok {
				t.Fatal("noSiLUMM still fuses")
			}
			want := allLogits(t, m, toks, chunks)
			m.be = be
			for p := range want {
				for j, v := range want[p] {
					if math.Float32bits(got[p][j]) != math.Float32bits(v) {
						t.Fatalf("row %d logit %d = %v fused, %v unfused", p, j, got[p][j], v)
					}
				}
			}
		})
	}
}
