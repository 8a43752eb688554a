package demo

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/modelfile/gguf"
	"github.com/sluice-llm/sluice/modelfile/tokfile"
)

// testShape is a small geometry whose rows are multiples of 256, so that
// every k-quant applies (Dim 256) except where a row is not (HeadDim 64 q
// of 4 heads = 256, ffn 768).
var testShape = RealShape{Name: "test", Arch: "llama", Dim: 256, Hidden: 768, Layers: 8, Heads: 4, KVHeads: 2,
	HeadDim: 64, Vocab: 600, MaxPos: 512, Tied: true, RopeTheta: 10000}

// TestTensorTypes checks the type of every tensor in each format against
// llama-quantize's rules: norms F32; the classifier (tied: token_embd) at
// Q6_K in Q4_0 and k-quant files; attn_v and ffn_down of the use_more_bits
// layers at Q6_K in _M files.
func TestTensorTypes(t *testing.T) {
	q6Layers := map[int]bool{0: true, 3: true, 6: true, 7: true} // use_more_bits for 8 layers
	for l := range 8 {
		if useMoreBits(l, 8) != q6Layers[l] {
			t.Fatalf("useMoreBits(%d, 8) = %v", l, !q6Layers[l])
		}
	}
	cases := []struct {
		format               string
		base, embd, moreBits gguf.GGMLType
		wantFileType         uint32
	}{
		{FormatGGUF, gguf.TypeF32, gguf.TypeF32, gguf.TypeF32, 0},
		{FormatGGUFF16, gguf.TypeF16, gguf.TypeF16, gguf.TypeF16, 1},
		{FormatGGUFBF16, gguf.TypeBF16, gguf.TypeBF16, gguf.TypeBF16, 32},
		{FormatGGUFQ8_0, gguf.TypeQ8_0, gguf.TypeQ8_0, gguf.TypeQ8_0, 7},
		{FormatGGUFQ4_0, gguf.TypeQ4_0, gguf.TypeQ6_K, gguf.TypeQ4_0, 2},
		{FormatGGUFQ4KM, gguf.TypeQ4_K, gguf.TypeQ6_K, gguf.TypeQ6_K, 15},
		{FormatGGUFQ5KM, gguf.TypeQ5_K, gguf.TypeQ6_K, gguf.TypeQ6_K, 17},
		{FormatGGUFQ6K, gguf.TypeQ6_K, gguf.TypeQ6_K, gguf.TypeQ6_K, 18},
	}
	for _, c := range cases {
		t.Run(c.format, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := GenerateShape(path, testShape, 1, c.format); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if ft, _ := f.Meta.Uint("general.file_type"); uint32(ft) != c.wantFileType {
				t.Errorf("general.file_type %d, want %d", ft, c.wantFileType)
			}
			if toks, _ := f.Meta.Strings("tokenizer.ggml.tokens"); len(toks) != testShape.Vocab {
				t.Errorf("%d vocabulary tokens, want %d", len(toks), testShape.Vocab)
			}
			for _, ti := range f.Tensors() {
				want := c.base
				var layer int
				var rest string
				fmt.Sscanf(ti.Name, "blk.%d.%s", &layer, &rest)
				switch {
				case len(ti.Dims) == 1:
					want = gguf.TypeF32
				case ti.Name == "token_embd.weight":
					want = c.embd
				case (rest == "attn_v.weight" || rest == "ffn_down.weight") && q6Layers[layer]:
					want = c.moreBits
				}
				if ti.Type != want {
					t.Errorf("%s: %s, want %s", ti.Name, ti.Type, want)
				}
				if _, _, err := f.TensorData(ti.Name); err != nil {
					t.Errorf("%s: %v", ti.Name, err)
				}
			}
		})
	}
}

// TestRealShapes checks the published geometries (the GGUF writer is
// exercised on testShape; these are multi-GB files).
func TestRealShapes(t *testing.T) {
	cases := []struct {
		name   string
		params float64 // billions, as published (tied counted once)
	}{
		{"llama3.2-1b", 1.24}, {"llama3.2-3b", 3.21}, {"llama3.1-8b", 8.03},
		{"qwen2.5-0.5b", 0.49}, {"qwen2.5-1.5b", 1.54}, {"qwen3-0.6b", 0.60}, {"qwen3-1.7b", 1.72},
		{"gpt-oss-20b", 20.91}, {"qwen3-30b-a3b", 30.53},
	}
	for _, c := range cases {
		s := RealShapes[c.name]
		var n float64
		for _, ti := range realTensors(s, FormatGGUF) {
			n += float64(ti.rows) * float64(ti.cols) * float64(max(ti.experts, 1))
		}
		if d := n/1e9 - c.params; d > 0.02 || d < -0.02 {
			t.Errorf("%s: %.3f B parameters, want %.2f B", c.name, n/1e9, c.params)
		}
	}
	if !strings.Contains(strings.Join(ShapeNames(), ","), "qwen3-1.7b") {
		t.Errorf("ShapeNames %v", ShapeNames())
	}
}

// TestVocabCoversEmbedding checks the invariant llama.cpp loads by: the
// token list is as long as token_embd has rows (its vocabulary size comes
// from the list). gpt-oss shapes write a smaller built-in tokenizer, padded
// as convert_hf_to_gguf.py pads ("[PAD<i>]", type unused) so that their
// stop tokens (<|return|> 200002, <|call|> 200012) name real ids.
func TestVocabCoversEmbedding(t *testing.T) {
	cases := []struct {
		shape          string
		format         string
		builtIn        int // tokens of the built-in tokenizer
		wantEOS, wantT int32
	}{
		{"gpt-oss-tiny", FormatGGUFMXFP4, 1024, 200002, 200012},
		{"qwen3-moe-tiny", FormatGGUFQ4KM, 1024, 1021, 1023},
	}
	for _, c := range cases {
		t.Run(c.shape, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := GenerateReal(path, c.shape, 1, c.format); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var rows uint64
			for _, ti := range f.Tensors() {
				if ti.Name == "token_embd.weight" {
					rows = ti.Dims[1]
				}
			}
			toks, _ := f.Meta.Strings("tokenizer.ggml.tokens")
			types, _ := f.Meta.Int32s("tokenizer.ggml.token_type")
			if uint64(len(toks)) != rows || len(types) != len(toks) {
				t.Fatalf("%d tokens, %d types, token_embd %d rows", len(toks), len(types), rows)
			}
			for i := c.builtIn; i < len(toks); i++ {
				if toks[i] != fmt.Sprintf("[PAD%d]", i) || types[i] != tokfile.TokenTypeUnused {
					t.Fatalf("token %d: %q type %d, want [PAD%d] unused", i, toks[i], types[i], i)
				}
			}
			for i := range c.builtIn {
				if strings.HasPrefix(toks[i], "[PAD") || types[i] == tokfile.TokenTypeUnused {
					t.Fatalf("built-in token %d: %q type %d", i, toks[i], types[i])
				}
			}
			v, err := tokfile.GGUFVocabFromMeta(&f.Meta)
			if err != nil {
				t.Fatal(err)
			}
			if v.EOS != c.wantEOS || v.EOT != c.wantT {
				t.Errorf("EOS %d, EOT %d; want %d, %d", v.EOS, v.EOT, c.wantEOS, c.wantT)
			}
		})
	}
}

// TestMoEQ4KMTypesMatchLlamaQuantize checks gen-model's Q4_K_M tensor types
// for a 48-layer qwen3moe file, the full Qwen3-30B-A3B shape's included,
// against the types llama-quantize (llama.cpp build 11669) chose when it
// quantized a 48-layer F32 qwen3moe file of the same tensor names (Dim 256,
// 16 experts of 256; written by GenerateShape): attn_v and ffn_down_exps of
// the use_more_bits layers at Q6_K, the classifier at Q6_K, the router and
// norms at F32, everything else Q4_K. The golden lists that file's
// tensors as llama-quantize wrote them (name and type).
func TestMoEQ4KMTypesMatchLlamaQuantize(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "qwen3moe-48-layers.q4_k_m.llama-quantize.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(golden)), "\n") {
		name, typ, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("golden line %q", line)
		}
		want[name] = typ
	}
	small := RealShape{Name: "qwen3moe-48", Arch: "qwen3moe", Dim: 256, Hidden: 512, Layers: 48, Heads: 4, KVHeads: 2, HeadDim: 64,
		Vocab: 1024, MaxPos: 4096, RopeTheta: 1e6, QKNorm: true, Experts: 16, TopK: 2, ExpertHidden: 256}
	for _, s := range []RealShape{small, RealShapes["qwen3-30b-a3b"]} {
		t.Run(s.Name, func(t *testing.T) {
			ts := realTensors(s, FormatGGUFQ4KM)
			if len(ts) != len(want) {
				t.Errorf("%d tensors, llama-quantize wrote %d", len(ts), len(want))
			}
			q6 := 0
			for _, ti := range ts {
				w, ok := want[ti.name]
				switch {
				case !ok:
					t.Errorf("%s: not in llama-quantize's file", ti.name)
				case ti.typ.String() != w:
					t.Errorf("%s: %s, llama-quantize chose %s", ti.name, ti.typ, w)
				}
				if ti.typ == gguf.TypeQ6_K {
					q6++
				}
			}
			if q6 != 49 { // 24 attn_v, 24 ffn_down_exps, output
				t.Errorf("%d Q6_K tensors, want 49", q6)
			}
		})
	}
}
