package tokenizer

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/internal/testenv"
)

// writeRanks writes a tiny tiktoken encoding (the 256 bytes, then "ab" and
// "abc") in the plain .tiktoken form and in the npm JSON form, and
// returns their paths.
func writeRanks(t *testing.T, dir string) (plain, npm string) {
	t.Helper()
	toks := make([][]byte, 0, 258)
	for b := 0; b < 256; b++ {
		toks = append(toks, []byte{byte(b)})
	}
	toks = append(toks, []byte("ab"), []byte("abc"))
	var pl, comp strings.Builder
	comp.WriteString("! 0")
	for r, tok := range toks {
		b64 := base64.StdEncoding.EncodeToString(tok)
		fmt.Fprintf(&pl, "%s %d\n", b64, r)
		comp.WriteString(" " + b64)
	}
	plain = filepath.Join(dir, "o200k_base.tiktoken")
	npm = filepath.Join(dir, "tiny.json")
	js := fmt.Sprintf(`{"pat_str": %q, "special_tokens": {"<|endoftext|>": 258}, "bpe_ranks": %q}`, `\s+|\S+`, comp.String())
	if err := os.WriteFile(plain, []byte(pl.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(npm, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	return plain, npm
}

// TestLoadTiktokenRoutes checks that Load recognises tiktoken encodings in
// both forms and the o200k_harmony name, with the ranks found from the
// model path or given after the name.
func TestLoadTiktokenRoutes(t *testing.T) {
	dir := t.TempDir()
	plain, npm := writeRanks(t, dir)
	for _, tc := range []struct {
		name             string
		model, tokenizer string
		vocab            int
		harmony          bool
	}{
		{name: "plain file", tokenizer: plain, vocab: 258},
		{name: "plain file as model", model: plain, vocab: 258},
		{name: "npm json", tokenizer: npm, vocab: 259},
		{name: "harmony ranks from model dir", model: dir, tokenizer: HarmonyName, vocab: HarmonyVocabSize, harmony: true},
		{name: "harmony ranks from model file", model: plain, tokenizer: HarmonyName, vocab: HarmonyVocabSize, harmony: true},
		{name: "harmony ranks named", model: "/nonexistent", tokenizer: HarmonyName + ":" + dir, vocab: HarmonyVocabSize, harmony: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(tc.model, tc.tokenizer)
			if err != nil {
				t.Fatal(err)
			}
			if m.VocabSize() != tc.vocab {
				t.Errorf("vocab %d, want %d", m.VocabSize(), tc.vocab)
			}
			if got, want := m.EncodeWith("abc ab", Options{}), []int32{257, 32, 256}; !slices.Equal(got, want) {
				t.Errorf("encode %v, want %v", got, want)
			}
			if tc.harmony {
				if id, ok := m.TokenID("<|call|>"); !ok || id != 200012 {
					t.Errorf("<|call|> = %d, %v", id, ok)
				}
				if got := m.Info().EOSIDs; !slices.Equal(got, []int32{200002, 199999, 200012}) {
					t.Errorf("EOS ids %v", got)
				}
				ids := m.EncodeWith("<|channel|>final<|message|>ab<|return|>", Options{ParseSpecial: true})
				if ids[0] != 200005 || ids[len(ids)-1] != 200002 {
					t.Errorf("harmony markup encodes as %v", ids)
				}
			}
		})
	}
}

func TestLoadTiktokenErrors(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "ranks.tiktoken")
	if err := os.WriteFile(other, []byte("YQ== 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, model, tokenizer, want string
	}{
		{"harmony without ranks", "", HarmonyName, "no rank file"},
		{"harmony dir without ranks", dir, HarmonyName, "holds neither"},
		{"harmony missing file", "", HarmonyName + ":" + filepath.Join(dir, "nope"), "find o200k_base ranks"},
		{"plain file without pattern", "", other, "pat_str"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.model, tc.tokenizer)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestSniffTiktokenJSON checks the decision between the two JSON forms.
func TestSniffTiktokenJSON(t *testing.T) {
	for in, want := range map[string]bool{
		`{"pat_str": "x", "bpe_ranks": ""}`:                    true,
		`{"special_tokens": {}, "bpe_ranks": ""}`:              true,
		`{"version": "1.0", "model": {"type": "BPE"}}`:         false,
		`{"truncation": null, "added_tokens": [], "model": 1}`: false,
		`[1, 2]`:   false,
		`not json`: false,
		`{"x": 1}`: false,
		``:         false,
	} {
		got, err := sniffTiktokenJSON(strings.NewReader(in))
		if err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
}

// FuzzSniffTiktokenJSON: any input decides without panicking.
func FuzzSniffTiktokenJSON(f *testing.F) {
	f.Add(`{"pat_str": "x"}`)
	f.Add(`{"model": {}}`)
	f.Add(`{"a": [1, {"b": 2}], "bpe_ranks": "`)
	f.Fuzz(func(t *testing.T, in string) {
		_, _ = sniffTiktokenJSON(strings.NewReader(in))
	})
}

// TestLoadSharedO200k routes the real o200k_base rank file (tiktoken's npm
// JSON) through Load, as o200k_base and as o200k_harmony from its
// directory, and checks both against LoadTiktoken/LoadO200kHarmony.
func TestLoadSharedO200k(t *testing.T) {
	path := testenv.SharedFile(t, o200kFile)
	text := "Hello, world! <|channel|>final<|message|>日本語 1234"
	for _, tc := range []struct {
		name, model, tokenizer string
		harmony                bool
	}{
		{"npm json", "", path, false},
		{"harmony from dir", filepath.Dir(path), HarmonyName, true},
		{"harmony named", "", HarmonyName + ":" + path, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(tc.model, tc.tokenizer)
			if err != nil {
				t.Fatal(err)
			}
			want := loadO200k(t, tc.harmony).Encode(text, false)
			if got := m.Encode(text, false); !slices.Equal(got, want) {
				t.Errorf("encode %v, want %v", got, want)
			}
		})
	}
}
