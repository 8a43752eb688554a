package runner

import (
	"path/filepath"
	"testing"

	"github.com/sluice-llm/sluice/modelfile/demo"
	"github.com/sluice-llm/sluice/text/tokenizer"
)

// TestDemoTokenizer loads the generated demo tokenizer (HF tokenizer.json
// and the GGUF vocabulary) with the frontend's tokenizer and checks that
// text round-trips, special tokens are recognised and every id decodes.
func TestDemoTokenizer(t *testing.T) {
	for _, shape := range []string{"tiny", "15m"} {
		dir := t.TempDir()
		if err := demo.Generate(dir, shape, 0, demo.FormatGGUF); err != nil {
			t.Fatal(err)
		}
		vocab := demo.Shapes[shape].Vocab
		hf, err := tokenizer.LoadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		gg, err := tokenizer.LoadGGUF(filepath.Join(dir, demo.GGUFFile))
		if err != nil {
			t.Fatal(err)
		}
		text := "<|im_start|>user\nOnce upon a time, the model said: \"héllo 42!\"<|im_end|>\n"
		for name, tok := range map[string]*tokenizer.Model{"tokenizer.json": hf, "gguf": gg} {
			if tok.VocabSize() != vocab {
				t.Errorf("%s %s: vocab %d, want %d", shape, name, tok.VocabSize(), vocab)
			}
			ids := tok.Encode(text, false)
			if got := tok.Decode(ids, false); got != text {
				t.Errorf("%s %s: round trip %q -> %v -> %q", shape, name, text, ids, got)
			}
			if id, ok := tok.TokenID("<|im_end|>"); !ok || id != int32(vocab-1) || !tok.IsSpecial(id) {
				t.Errorf("%s %s: <|im_end|> = %d %v", shape, name, id, ok)
			}
			if len(ids) >= len(text)/2 {
				t.Errorf("%s %s: %d tokens for %d bytes: merges not applied", shape, name, len(ids), len(text))
			}
			for id := 0; id < vocab; id++ {
				if len(tok.TokenBytes(int32(id))) == 0 {
					t.Fatalf("%s %s: id %d decodes to nothing", shape, name, id)
				}
			}
		}
		if a, b := hf.Encode(text, false), gg.Encode(text, false); len(a) != len(b) {
			t.Errorf("%s: tokenizer.json and GGUF vocab disagree: %v vs %v", shape, a, b)
		}
	}
}
