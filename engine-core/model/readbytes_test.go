package model

import (
	"path/filepath"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
	"github.com/sluice-llm/sluice/modelfile/demo"
)

// TestTokenReadBytes checks the bytes a batch-1 decode step reads against
// two independent counts: the loader's WeightBytes (the file's tensors)
// less the embedding rows a step does not read, and, for dense models,
// the layer arithmetic of the shape (norms stored as F32, every
// projection in the file's main type or, for the _M files, its Q6_K
// layers). For expert blocks only TopK of Experts experts are counted.
func TestTokenReadBytes(t *testing.T) {
	dense := demo.RealShape{Name: "test", Arch: "llama", Dim: 256, Hidden: 768, Layers: 4, Heads: 4, KVHeads: 2,
		HeadDim: 64, Vocab: 600, MaxPos: 256, RopeTheta: 10000}
	tied := dense
	tied.Tied = true
	qwen2 := dense
	qwen2.Arch, qwen2.QKVBias = "qwen2", true
	moe := demo.RealShapes["qwen3-moe-tiny"]
	for _, c := range []struct {
		name   string
		shape  demo.RealShape
		format string
		dt     kernels.DType // every projection's type (0: mixed, skip the arithmetic)
	}{
		{"f16", dense, demo.FormatGGUFF16, kernels.F16},
		{"f16-tied", tied, demo.FormatGGUFF16, kernels.F16},
		{"q8_0", dense, demo.FormatGGUFQ8_0, kernels.Q8_0},
		{"q8_0-qwen2", qwen2, demo.FormatGGUFQ8_0, kernels.Q8_0},
		{"q4_k_m", dense, demo.FormatGGUFQ4KM, 0},
		{"qwen3-moe-q4_k_m", moe, demo.FormatGGUFQ4KM, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := demo.GenerateShape(path, c.shape, 3, c.format); err != nil {
				t.Fatal(err)
			}
			be := cpu.New(cpu.Options{Threads: 1})
			defer be.Close()
			m, err := Load(path, be, LoadOptions{MaxPos: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			got := m.TokenReadBytes()

			// the file's weights less what a step leaves unread
			want := m.WeightBytes()
			if !m.Cfg.Tied {
				e := m.Embed
				want -= int64(e.Rows()-1) * int64(e.DType().RowBytes(e.Cols()))
			}
			if a := m.Cfg.MoE; a != nil {
				var ex int64
				for l := range m.Layers {
					for _, x := range m.Layers[l].Experts {
						ex += tensorBytes(x.Gate) + tensorBytes(x.Up) + tensorBytes(x.Down)
					}
				}
				if ex == 0 {
					t.Fatal("no expert weights loaded")
				}
				want -= ex - ex*int64(a.MoE.TopK)/int64(a.MoE.Experts)
			}
			if got != want {
				t.Errorf("TokenReadBytes = %d, want %d (WeightBytes %d)", got, want, m.WeightBytes())
			}

			if c.dt == 0 {
				return
			}
			s := c.shape
			q, kv := int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
			d, h := int64(s.Dim), int64(s.Hidden)
			rb := func(rows, cols int64) int64 { return rows * int64(c.dt.RowBytes(int(cols))) }
			layer := 2*4*d + rb(q, d) + 2*rb(kv, d) + rb(d, q) + 2*rb(h, d) + rb(d, h)
			if s.QKVBias {
				layer += 4 * (q + 2*kv)
			}
			arith := int64(s.Layers)*layer + 4*d + rb(int64(s.Vocab), d)
			if !s.Tied {
				arith += rb(1, d)
			}
			if got != arith {
				t.Errorf("TokenReadBytes = %d, shape arithmetic gives %d", got, arith)
			}
		})
	}
}
