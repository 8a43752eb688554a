package demo

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/modelfile/gguf"
	"github.com/sluice-llm/sluice/modelfile/hfconfig"
	"github.com/sluice-llm/sluice/modelfile/safetensors"
	"github.com/sluice-llm/sluice/modelfile/tokfile"
)

func TestTokenizer(t *testing.T) {
	for _, vocab := range []int{512, 32000} {
		tok := buildTokenizer(vocab)
		if len(tok.tokens) != vocab {
			t.Fatalf("vocab %d: %d tokens", vocab, len(tok.tokens))
		}
		seen := map[string]bool{}
		for _, s := range tok.tokens {
			if seen[s] || s == "" {
				t.Fatalf("vocab %d: duplicate or empty token %q", vocab, s)
			}
			seen[s] = true
		}
		for i, m := range tok.merges {
			if !seen[m[0]] || !seen[m[1]] || !seen[m[0]+m[1]] {
				t.Fatalf("merge %d %v refers to unknown tokens", i, m)
			}
		}
		b, err := tok.tokenizerJSON()
		if err != nil {
			t.Fatal(err)
		}
		tj, err := tokfile.ParseTokenizerJSON(b)
		if err != nil {
			t.Fatalf("tokfile rejects the generated tokenizer.json: %v", err)
		}
		if len(tj.Model.Vocab)+len(tj.AddedTokens) != vocab || tj.AddedTokens[3].Content != "<|im_end|>" || tj.AddedTokens[3].ID != vocab-1 {
			t.Errorf("vocab %d: parsed %d + %d tokens", vocab, len(tj.Model.Vocab), len(tj.AddedTokens))
		}
	}
	// the learned merges cover common English words whole
	tok := buildTokenizer(512)
	have := map[string]bool{}
	for _, s := range tok.tokens {
		have[s] = true
	}
	for _, w := range []string{"Ġthe", "Ġand"} {
		if !have[w] {
			t.Errorf("learned vocabulary lacks %q", w)
		}
	}
}

func TestGenerateDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		if err := Generate(d, "tiny", 7, FormatHF); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		x, err1 := os.ReadFile(filepath.Join(a, f))
		y, err2 := os.ReadFile(filepath.Join(b, f))
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two runs (%v %v)", f, err1, err2)
		}
	}
	c, err := hfconfig.Load(a)
	if err != nil || c.HiddenSize != 64 || c.NumKeyValueHeads != 2 || len(c.EOSTokenIDs) != 2 {
		t.Fatalf("config: %+v %v", c, err)
	}
	m, err := safetensors.OpenModel(a)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if ti, ok := m.Tensor("model.layers.1.self_attn.k_proj.weight"); !ok || ti.Shape[0] != 32 || ti.Shape[1] != 64 {
		t.Errorf("k_proj: %+v", ti)
	}
	other := t.TempDir()
	Generate(other, "tiny", 8, FormatHF)
	x, _ := os.ReadFile(filepath.Join(a, "model.safetensors"))
	y, _ := os.ReadFile(filepath.Join(other, "model.safetensors"))
	if bytes.Equal(x, y) {
		t.Error("different seeds gave the same weights")
	}
}

func TestGenerateGGUF(t *testing.T) {
	for _, format := range []string{FormatGGUF, FormatGGUFQ8_0} {
		d := t.TempDir()
		if err := Generate(d, "tiny", 0, format); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(filepath.Join(d, GGUFFile))
		if err != nil {
			t.Fatal(err)
		}
		ti, ok := f.Tensor("blk.0.ffn_up.weight")
		want := gguf.TypeF32
		if format == FormatGGUFQ8_0 {
			want = gguf.TypeQ8_0
		}
		if !ok || ti.Type != want || ti.Dims[0] != 64 || ti.Dims[1] != 172 {
			t.Errorf("%s: ffn_down %+v", format, ti)
		}
		if toks, _ := f.Meta.Strings("tokenizer.ggml.tokens"); len(toks) != 512 {
			t.Errorf("%s: %d tokens", format, len(toks))
		}
		f.Close()
	}
}

func TestEnsureCached(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	d1, err := EnsureCached("tiny", 3)
	if err != nil {
		t.Fatal(err)
	}
	st1, _ := os.Stat(filepath.Join(d1, "model.safetensors"))
	d2, err := EnsureCached("tiny", 3)
	if err != nil || d1 != d2 {
		t.Fatalf("second call: %s %v", d2, err)
	}
	st2, _ := os.Stat(filepath.Join(d2, "model.safetensors"))
	if !st1.ModTime().Equal(st2.ModTime()) {
		t.Error("second call regenerated the model")
	}
	if _, err := EnsureCached("huge", 0); err == nil {
		t.Error("unknown shape: want error")
	}
}

func TestMain_(t *testing.T) {
	if err := Main([]string{"--shape", "tiny"}); err == nil {
		t.Error("missing --out: want error")
	}
	d := t.TempDir()
	if err := Main([]string{"--out", d, "--shape", "tiny", "--seed", "1", "--format", "gguf"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d, GGUFFile)); err != nil {
		t.Error(err)
	}
}

func TestResolve(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, c := range []struct {
		in     string
		ok     bool
		suffix string
	}{{"demo", true, "demo-tiny-0"}, {"demo-tiny", true, "demo-tiny-0"}, {"demonstration", false, ""}, {"/models/x", false, ""}} {
		dir, ok, err := Resolve(c.in)
		if err != nil || ok != c.ok || !strings.HasSuffix(dir, c.suffix) {
			t.Errorf("Resolve(%q) = %q, %v, %v", c.in, dir, ok, err)
		}
	}
	if _, ok, err := Resolve("demo-huge"); !ok || err == nil {
		t.Error("demo-huge: want an error")
	}
}
