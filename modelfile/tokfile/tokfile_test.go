package tokfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/internal/testenv"
	"github.com/sluice-llm/sluice/modelfile/gguf"
)

func TestReadTokenizerJSON(t *testing.T) {
	tj, err := ReadTokenizerJSON("testdata/tokenizer_merges_both.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(tj.Model.Merges); got != "[[a b] [ab b]]" {
		t.Errorf("merges = %s", got)
	}
	if !tj.Model.IgnoreMerges || tj.Model.Vocab["abb"] != 4 {
		t.Errorf("model = %+v", tj.Model)
	}
	if tj.Normalizer.Type != "Sequence" || tj.Normalizer.Normalizers[0].Prepend != "▁" || tj.Normalizer.Normalizers[1].Pattern.String != " " {
		t.Errorf("normalizer = %+v", tj.Normalizer)
	}
	pt := tj.PreTokenizer.PreTokenizers
	if len(pt) != 2 || pt[0].Pattern.Regex != `\p{N}` || pt[0].Behavior != "Isolated" || pt[1].Type != "ByteLevel" {
		t.Errorf("pre_tokenizer = %+v", pt)
	}
	if at := tj.AddedTokens[0]; at.Content != "<|end|>" || !at.RStrip || !at.Special || at.ID != 5 {
		t.Errorf("added token = %+v", at)
	}
	if pp := tj.PostProcessor; pp.Type != "TemplateProcessing" || pp.SpecialTokens["<s>"].IDs[0] != 1 || pp.Single[0].SpecialToken.ID != "<s>" || pp.Single[1].Sequence == nil {
		t.Errorf("post_processor = %+v", pp)
	}
}

func TestTokenizerJSONErrors(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"not json", `{`, "parse tokenizer.json"},
		{"no model", `{"added_tokens": []}`, "field model"},
		{"no vocab", `{"model": {"type": "BPE"}}`, "model.vocab"},
		{"bad merge string", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]}}`, "model.merges[0]"},
		{"bad merge list", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a"]]}}`, "model.merges[0]"},
		{"bad merge type", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [3]}}`, "model.merges[0]"},
		{"negative id", `{"model": {"type": "BPE", "vocab": {"a": -1}}}`, "model.vocab"},
		{"empty added", `{"model": {"type": "BPE", "vocab": {"a": 0}}, "added_tokens": [{"id": 1, "content": ""}]}`, "added_tokens[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTokenizerJSON([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want mention of %q", err, tc.want)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	os.WriteFile(path, []byte(`{"model": {}}`), 0o644)
	if _, err := ReadTokenizerJSON(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("error does not name the file: %v", err)
	}
}

func TestRealTokenizerJSON(t *testing.T) {
	for _, tc := range []struct {
		rel     string
		vocab   int
		merges  int
		added   int
		regexOK bool
	}{
		{"tokenizers/llama3/tokenizer.json", 128000, 280147, 256, true},
		{"tokenizers/qwen3/tokenizer.json", 151643, 151387, 26, true},
	} {
		tj, err := ReadTokenizerJSON(testenv.SharedFile(t, tc.rel))
		if err != nil {
			t.Fatal(err)
		}
		if len(tj.Model.Vocab) != tc.vocab || len(tj.Model.Merges) != tc.merges || len(tj.AddedTokens) != tc.added {
			t.Errorf("%s: vocab %d merges %d added %d", tc.rel, len(tj.Model.Vocab), len(tj.Model.Merges), len(tj.AddedTokens))
		}
		cfg, err := ReadTokenizerConfig(filepath.Join(filepath.Dir(testenv.SharedFile(t, tc.rel)), "tokenizer_config.json"))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.ChatTemplate == "" || cfg.EOSToken == "" {
			t.Errorf("%s config: %+v", tc.rel, cfg)
		}
	}
}

func TestTokenizerConfig(t *testing.T) {
	c, err := ReadTokenizerConfig("testdata/tokenizer_config_list.json")
	if err != nil {
		t.Fatal(err)
	}
	if c.BOSToken != "<s>" || c.EOSToken != "</s>" || c.UnkToken != "" || c.AddBOSToken == nil || !*c.AddBOSToken || c.AddEOSToken == nil || *c.AddEOSToken {
		t.Errorf("config = %+v", c)
	}
	if !strings.HasPrefix(c.ChatTemplate, "{% for m") || c.ChatTemplates["tool_use"] != "{{ tools }}" || c.TokenizerClass != "LlamaTokenizer" {
		t.Errorf("templates = %q %v", c.ChatTemplate, c.ChatTemplates)
	}
	for _, bad := range []struct{ json, want string }{
		{`{"chat_template": 3}`, "chat_template"},
		{`{"chat_template": [{"template": "x"}]}`, "chat_template[0]"},
		{`{"bos_token": 1}`, "bos_token"},
		{`{"eos_token": {"special": true}}`, "eos_token"},
	} {
		if _, err := ParseTokenizerConfig([]byte(bad.json)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: err = %v", bad.json, err)
		}
	}
}

func TestGenerationConfig(t *testing.T) {
	g, err := ReadGenerationConfig("testdata/generation_config_list.json")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(g.EOSTokenIDs) != "[128001 128008 128009]" || g.BOSTokenID != 128000 || g.PadTokenID != -1 {
		t.Errorf("list form: %+v", g)
	}
	g, err = ReadGenerationConfig("testdata/generation_config_int.json")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(g.EOSTokenIDs) != "[2]" || g.BOSTokenID != 1 || g.PadTokenID != 0 {
		t.Errorf("int form: %+v", g)
	}
	for _, bad := range []string{`{"eos_token_id": "x"}`, `{"eos_token_id": [-1]}`, `{"bos_token_id": [1.5]}`, `[`} {
		if _, err := ParseGenerationConfig([]byte(bad)); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}

func TestGGUFVocab(t *testing.T) {
	v, err := ReadGGUFVocab(testenv.SharedFile(t, "tokenizers/llama-cpp-vocab/ggml-vocab-phi-3.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Model != "llama" || len(v.Tokens) != 32064 || len(v.Scores) != 32064 || v.BOS != 1 || v.EOS != 32000 || v.UNK != 0 || v.PAD != 32000 {
		t.Errorf("phi-3 vocab: model %s tokens %d bos %d eos %d unk %d pad %d", v.Model, len(v.Tokens), v.BOS, v.EOS, v.UNK, v.PAD)
	}
	if v.AddBOS == nil || !*v.AddBOS || v.TokenTypes[32007] != TokenTypeControl || !strings.Contains(v.ChatTemplate, "<|user|>") {
		t.Errorf("phi-3 vocab flags/types/template wrong")
	}
	g, err := ReadGGUFVocab(testenv.SharedFile(t, "tokenizers/llama-cpp-vocab/ggml-vocab-gpt-2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if g.Model != "gpt2" || g.Pre != "gpt-2" || len(g.Merges) != 50000 || g.Merges[0] != [2]string{"Ġ", "t"} {
		t.Errorf("gpt-2 vocab: %s %s %d %v", g.Model, g.Pre, len(g.Merges), g.Merges[0])
	}
	a, err := ReadGGUFVocab(testenv.SharedFile(t, "aidreams260K/aidreams260K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if a.PAD != -1 { // stored as 0xFFFFFFFF
		t.Errorf("aidreams PAD = %d, want -1", a.PAD)
	}
}

func llama2cBytes(maxLen int32, toks []string, scores []float32) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, maxLen)
	for i, tok := range toks {
		binary.Write(&b, binary.LittleEndian, math.Float32bits(scores[i]))
		binary.Write(&b, binary.LittleEndian, int32(len(tok)))
		b.WriteString(tok)
	}
	return b.Bytes()
}

func TestLlama2C(t *testing.T) {
	v, err := ReadLlama2C(testenv.SharedFile(t, "tokenizers/llama2-sentencepiece/tokenizer.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Tokens) != 32000 || v.Tokens[13] != "<0x0A>" || v.Tokens[278] != " the" {
		t.Errorf("llama2 tokenizer.bin: %d tokens, [13]=%q [278]=%q", len(v.Tokens), v.Tokens[13], v.Tokens[278])
	}
	a, err := ReadLlama2C(testenv.SharedFile(t, "aidreams260K/tok512.bin"))
	if err != nil || len(a.Tokens) != 512 {
		t.Fatalf("tok512.bin: %v", err)
	}
	good := llama2cBytes(8, []string{"<unk>", "ab"}, []float32{0, -1.5})
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "max_token_len"},
		{"zero max", llama2cBytes(0, nil, nil), "max_token_len"},
		{"truncated header", good[:len(good)-4], "token 1"},
		{"length beyond file", append(append([]byte{}, good[:len(good)-2]...), 0), "token 1"},
		{"no tokens", llama2cBytes(3, nil, nil), "tokens"},
	}
	for _, tc := range tests {
		if _, err := ParseLlama2C(tc.data); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want mention of %q", tc.name, err, tc.want)
		}
	}
	if v, err := ParseLlama2C(good); err != nil || v.Tokens[1] != "ab" || v.Scores[1] != -1.5 {
		t.Errorf("good: %+v %v", v, err)
	}
}

func FuzzParseTokenizerJSON(f *testing.F) {
	for _, p := range []string{"testdata/tokenizer_merges_both.json"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a", "a"]]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseTokenizerJSON(data)
		_, _ = ParseTokenizerConfig(data)
		_, _ = ParseGenerationConfig(data)
	})
}

func FuzzParseLlama2C(f *testing.F) {
	f.Add(llama2cBytes(4, []string{"<unk>", "ab", " x"}, []float32{0, -1.5, 2}))
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseLlama2C(data)
		if err == nil && len(v.Tokens) != len(v.Scores) {
			t.Fatalf("%d tokens, %d scores", len(v.Tokens), len(v.Scores))
		}
	})
}

func FuzzGGUFVocab(f *testing.F) {
	var buf bytes.Buffer
	err := gguf.Write(&buf, []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "llama"},
		{Key: "tokenizer.ggml.tokens", Value: []string{"<unk>", "<s>", "a"}},
		{Key: "tokenizer.ggml.scores", Value: []float32{0, 0, -1}},
		{Key: "tokenizer.ggml.token_type", Value: []int32{2, 3, 1}},
		{Key: "tokenizer.ggml.merges", Value: []string{"a a"}},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(1)},
		{Key: "tokenizer.ggml.add_bos_token", Value: true},
	}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := gguf.Parse(data)
		if err != nil {
			return
		}
		v, err := GGUFVocabFromMeta(&g.Meta)
		if err != nil {
			return
		}
		n := int32(len(v.Tokens))
		for _, id := range []int32{v.BOS, v.EOS, v.UNK, v.PAD, v.EOT} {
			if id < -1 || id >= n {
				t.Fatalf("special id %d out of range for %d tokens", id, n)
			}
		}
	})
}
