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

// TestRecordGroups checks the counts of rows per active expert that
// recordGroups turns on: over steps of given chunk sizes every routed row
// is counted once (Σ g·groups[g] = layers · tokens · topK), one-token
// steps give only groups of one row (topK of them a layer), no layer's
// step has more active experts than experts or routed rows, and
// recording changes no logit.
func TestRecordGroups(t *testing.T) {
	toks := []int32{5, 17, 3, 90, 41, 8, 66, 12, 30, 7, 55, 2, 71, 19, 44, 60, 9, 23}
	cases := []struct {
		name   string
		chunks []int
	}{
		{"decode", []int{1, 1, 1, 1}},
		{"chunk9-decode", []int{9, 1, 1}},
		{"chunk16", []int{16}},
	}
	mm := randomMoEShape("gpt_oss", nil, 81, 8, 32)
	path := mm.writeGGUF(t)
	be := cpu.New(cpu.Options{Threads: 2, QuantizeActivations: true})
	defer be.Close()
	m, err := Load(path, be, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	k, experts := mm.topK, mm.experts
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := 0
			for _, ch := range c.chunks {
				n += ch
			}
			rec, plain := m.NewScratch(16, 16), m.NewScratch(16, 16)
			groups := rec.recordGroups()
			if len(groups) != 16*k+1 {
				t.Fatalf("len(groups) = %d, want %d", len(groups), 16*k+1)
			}
			got := logitsChunks(t, m, rec, toks[:n], c.chunks)
			want := logitsChunks(t, m, plain, toks[:n], c.chunks)
			for i := range want {
				for j := range want[i] {
					if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
						t.Fatalf("position %d logit %d: %v while recording, %v without", i, j, got[i][j], want[i][j])
					}
				}
			}
			var rows, active int64
			for g, cnt := range groups {
				rows += int64(g) * cnt
				active += cnt
			}
			if groups[0] != 0 {
				t.Errorf("groups[0] = %d, want 0", groups[0])
			}
			if want := int64(mm.layers * n * k); rows != want {
				t.Errorf("Σ g·groups[g] = %d, want layers·tokens·topK = %d", rows, want)
			}
			maxActive := int64(0)
			for _, ch := range c.chunks {
				maxActive += int64(mm.layers * min(experts, ch*k))
			}
			if active > maxActive || active < int64(mm.layers*len(c.chunks)) {
				t.Errorf("%d active experts over the steps, want between %d and %d", active, mm.layers*len(c.chunks), maxActive)
			}
			if c.name == "decode" && groups[1] != int64(mm.layers*n*k) {
				t.Errorf("one-token steps: groups[1] = %d, want %d (groups %v)", groups[1], mm.layers*n*k, groups)
			}
		})
	}
	if g := (&Scratch{}).recordGroups(); g != nil {
		t.Errorf("a scratch without expert blocks records %v, want nil", g)
	}
}
