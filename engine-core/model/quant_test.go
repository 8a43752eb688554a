package model

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
	"github.com/sluice-llm/sluice/modelfile/demo"
	"github.com/sluice-llm/sluice/modelfile/gguf"
	"github.com/sluice-llm/sluice/quant"
)

// TestQ4_0Loading rewrites the tiny demo GGUF with Q4_0 matrices, and a
// second copy holding the same dequantized values as F32, and checks both
// give the same logits.
func TestQ4_0Loading(t *testing.T) {
	dir := t.TempDir()
	if err := demo.Generate(dir, "tiny", 2, demo.FormatGGUF); err != nil {
		t.Fatal(err)
	}
	src, err := gguf.Open(filepath.Join(dir, demo.GGUFFile))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var meta []gguf.KV
	for _, k := range src.Meta.Keys() {
		v, _ := src.Meta.Value(k)
		meta = append(meta, gguf.KV{Key: k, Value: v})
	}
	var q4, f32 []gguf.Tensor
	for _, ti := range src.Tensors() {
		data, _, err := src.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		tq := gguf.Tensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: data}
		tf := tq
		if len(ti.Dims) == 2 && ti.Dims[0]%32 == 0 {
			vals := kernels.BytesToF32(data)
			tq.Type, tq.Data = gguf.TypeQ4_0, quant.AppendQ4_0(nil, vals)
			deq := make([]float32, len(vals))
			quant.DequantizeQ4_0(deq, tq.Data)
			tf.Data = gguf.EncodeF32(deq)
		}
		q4, f32 = append(q4, tq), append(f32, tf)
	}
	write := func(name string, ts []gguf.Tensor) string {
		p := filepath.Join(t.TempDir(), name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := gguf.Write(f, meta, ts); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return p
	}
	toks := []int32{508, 1, 77, 300, 12, 9, 410, 3}
	q4p, f32p := write("q4.gguf", q4), write("f32.gguf", f32)
	// The reference backend decodes Q4_0 exactly; the CPU backend meets it
	// with int8 activations (kernels/cpu's numeric contract: well under 1 %).
	for _, c := range []struct {
		name string
		be   kernels.Backend
		tol  float64 // relative to max |logit|
	}{{"ref", kernels.NewRef(), 1e-5}, {"cpu", cpu.New(cpu.Options{Threads: 2}), 0.02}} {
		var out [2][][]float32
		for i, p := range []string{q4p, f32p} {
			m, err := Load(p, c.be, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			out[i] = allLogits(t, m, toks, []int{5, 3})
			m.Close()
		}
		c.be.Close()
		var maxAbs, maxDiff float64
		for p := range out[0] {
			for j, v := range out[1][p] {
				maxAbs = math.Max(maxAbs, math.Abs(float64(v)))
				maxDiff = math.Max(maxDiff, math.Abs(float64(out[0][p][j]-v)))
			}
		}
		if maxDiff > c.tol*math.Max(1, maxAbs) {
			t.Errorf("%s: Q4_0 vs its F32 decoding: max |Δ logit| %g (max |logit| %g)", c.name, maxDiff, maxAbs)
		}
	}
}
