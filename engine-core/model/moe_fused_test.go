package model

import (
	"fmt"
	"math"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
)

// logitsChunks runs toks through m in the given chunks (one sequence, a
// fresh paged cache) on the scratch s and returns every position's logits.
func logitsChunks(t *testing.T, m *Model, s *Scratch, toks []int32, chunks []int) [][]float32 {
	t.Helper()
	const bs = 4
	nb := (len(toks) + bs - 1) / bs
	kv := m.NewKVCache(nb, bs)
	table := make([]int32, nb)
	for i := range table {
		table[i] = int32(nb - 1 - i)
	}
	var out [][]float32
	start := 0
	for _, c := range chunks {
		b := &Batch{Tokens: toks[start : start+c]}
		for i := 0; i < c; i++ {
			p := int32(start + i)
			b.Pos = append(b.Pos, p)
			b.OutRows = append(b.OutRows, int32(i))
			b.Attn.Slots = append(b.Attn.Slots, table[p/bs]*bs+p%bs)
		}
		b.Attn.QStart = []int32{0, int32(c)}
		b.Attn.CtxLen = []int32{int32(start + c)}
		b.Attn.Tables, b.Attn.TableStart, b.Attn.BlockSize = table, []int32{0, int32(nb)}, bs
		lg, err := m.Forward(s, kv, b)
		if err != nil {
			t.Fatal(err)
		}
		v := m.Cfg.Vocab
		for i := 0; i < c; i++ {
			out = append(out, append([]float32(nil), lg[i*v:(i+1)*v]...))
		}
		start += c
	}
	return out
}

// TestMoEFusedMatchesLoop checks the expert block's one-op-per-projection
// path (moeFFNFused: steps of up to moeFusedTokens tokens) against its
// per-expert loop on the same steps: a chunk of 9 tokens, then decode
// steps. With MXFP4 experts and quantized activations (the runner's
// path), F32 experts, or on the ref backend, the logits are the same bit
// for bit (each row gets the same kernels' results whatever the batch);
// BF16 experts on the CPU backend, whose batched kernels sum in another
// order than the batch-1 loop, agree to float rounding. A step of more
// than moeFusedTokens tokens takes the loop (TestMoEModelAgainstNaive
// checks both paths against the naive forward).
func TestMoEFusedMatchesLoop(t *testing.T) {
	cases := []struct {
		name, family, format string
		exact                bool
	}{
		{"gpt-oss-gguf-mxfp4", "gpt_oss", "gguf", true},
		{"gpt-oss-safetensors-f32", "gpt_oss", "hf-F32", true},
		{"qwen3-moe-gguf-bf16", "qwen3_moe", "gguf", false},
	}
	toks := []int32{5, 17, 3, 90, 41, 8, 66, 12, 30, 7, 55, 2, 71, 19, 44}
	chunks := []int{9, 1, 1, 1, 1, 1, 1}
	for ci, c := range cases {
		mm := randomMoE(c.family, nil, uint64(ci+40))
		var path string
		if c.format == "gguf" {
			path = mm.writeGGUF(t)
		} else {
			path = mm.writeHFExperts(t, c.format[3:])
		}
		for _, bc := range []struct {
			name string
			be   func() kernels.Backend
		}{
			{"ref", func() kernels.Backend { return kernels.NewRef() }},
			{"cpu", func() kernels.Backend { return cpu.New(cpu.Options{Threads: 2}) }},
			{"cpu-q8act", func() kernels.Backend { return cpu.New(cpu.Options{Threads: 2, QuantizeActivations: true}) }},
		} {
			t.Run(fmt.Sprintf("%s/%s", c.name, bc.name), func(t *testing.T) {
				be := bc.be()
				defer be.Close()
				m, err := Load(path, be, LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				fused, loop := m.NewScratch(len(toks), len(toks)), m.NewScratch(len(toks), len(toks))
				if fused.moe == nil || fused.moe.fused == nil {
					t.Fatal("the scratch has no fused expert path on this backend")
				}
				loop.moe.fused = nil
				got := logitsChunks(t, m, fused, toks, chunks)
				want := logitsChunks(t, m, loop, toks, chunks)
				exact := c.exact || bc.name == "ref"
				var maxErr, maxAbs float64
				for i := range want {
					for j, w := range want[i] {
						g := got[i][j]
						if exact && math.Float32bits(g) != math.Float32bits(w) {
							t.Fatalf("position %d logit %d: fused %v, per-expert loop %v", i, j, g, w)
						}
						maxErr = math.Max(maxErr, math.Abs(float64(g-w)))
						maxAbs = math.Max(maxAbs, math.Abs(float64(w)))
					}
				}
				if maxAbs == 0 || maxErr > 1e-4*math.Max(1, maxAbs) {
					t.Errorf("max |fused - loop| = %g (max |logit| %g)", maxErr, maxAbs)
				}
			})
		}
	}
}
