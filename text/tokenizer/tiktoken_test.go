package tokenizer

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
	"github.com/sluice-llm/sluice/internal/testenv"
	"github.com/sluice-llm/sluice/modelfile/tokfile"
)

const o200kFile = "tokenizers/o200k/o200k_base.json"

// loadO200k loads o200k_base (harmony false) or o200k_harmony once per
// test binary.
func loadO200k(t testing.TB, harmony bool) *Model {
	t.Helper()
	path := testenv.SharedFile(t, o200kFile)
	key := path
	if harmony {
		key += "#harmony"
	}
	fixtures.mu.Lock()
	defer fixtures.mu.Unlock()
	if m, ok := fixtures.m[key]; ok {
		return m
	}
	var m *Model
	var err error
	if harmony {
		m, err = LoadO200kHarmony(path)
	} else {
		m, err = LoadTiktoken(path, TiktokenOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	fixtures.m[key] = m
	return m
}

// TestO200kVectors checks every vector of o200k_base-vectors.json (made by
// the tiktoken npm package, tiktoken's Rust core, with no special tokens
// allowed) for o200k_base and o200k_harmony.
func TestO200kVectors(t *testing.T) {
	data, err := os.ReadFile(testenv.SharedFile(t, "tokenizers/o200k/o200k_base-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vec struct {
		Cases []struct {
			Text string  `json:"text"`
			IDs  []int32 `json:"ids"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &vec); err != nil {
		t.Fatal(err)
	}
	if len(vec.Cases) == 0 {
		t.Fatal("no vectors")
	}
	for _, harmony := range []bool{false, true} {
		m := loadO200k(t, harmony)
		for _, c := range vec.Cases {
			got := m.EncodeWith(c.Text, Options{})
			if !slices.Equal(got, c.IDs) {
				t.Errorf("harmony=%v %q:\n got %v\nwant %v", harmony, c.Text, got, c.IDs)
			}
			if dec := m.Decode(got, false); dec != c.Text {
				t.Errorf("harmony=%v decode %q = %q", harmony, c.Text, dec)
			}
		}
	}
}

func TestO200kHarmonySpecial(t *testing.T) {
	m := loadO200k(t, true)
	if m.VocabSize() != HarmonyVocabSize {
		t.Errorf("vocab %d, want %d", m.VocabSize(), HarmonyVocabSize)
	}
	for tok, want := range map[string]int32{
		"<|startoftext|>": 199998, "<|endoftext|>": 199999, "<|reserved_200000|>": 200000, "<|return|>": 200002,
		"<|constrain|>": 200003, "<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007,
		"<|message|>": 200008, "<|call|>": 200012, "<|reserved_200013|>": 200013, "<|endofprompt|>": 200018,
		"<|reserved_200018|>": 200018, "<|reserved_201087|>": 201087,
	} {
		if id, ok := m.TokenID(tok); !ok || id != want {
			t.Errorf("TokenID(%q) = %d, %v; want %d", tok, id, ok, want)
		}
		if !m.IsSpecial(want) {
			t.Errorf("%q not special", tok)
		}
	}
	if _, ok := m.TokenID("<|reserved_201088|>"); ok {
		t.Error("<|reserved_201088|> exists")
	}
	if m.Token(200018) != "<|endofprompt|>" {
		t.Errorf("200018 decodes as %q, want o200k_base's own name", m.Token(200018))
	}
	tk, err := tokfile.ReadTiktoken(testenv.SharedFile(t, o200kFile))
	if err != nil {
		t.Fatal(err)
	}
	naive := newNaiveTiktoken(t, tk)
	// A harmony transcript: special tokens are single ids, the text between
	// them is plain o200k_base.
	parts := []string{"<|start|>", "assistant", "<|channel|>", "analysis", "<|message|>", "Think.", "<|end|>",
		"<|start|>", "assistant", "<|channel|>", "commentary to=functions.get_weather ", "<|constrain|>", "json",
		"<|message|>", `{"x":1}`, "<|call|>"}
	var want []int32
	for _, p := range parts {
		if id, ok := m.TokenID(p); ok && m.IsSpecial(id) {
			want = append(want, id)
		} else {
			want = append(want, naive.encode(t, p)...)
		}
	}
	text := strings.Join(parts, "")
	ids := m.Encode(text, false)
	if !slices.Equal(ids, want) {
		t.Errorf("harmony markup:\n got %v\nwant %v", ids, want)
	}
	if !slices.Contains(ids, 200006) || !slices.Contains(ids, 200003) || !slices.Contains(ids, 200012) {
		t.Errorf("harmony markup ids %v lack <|start|>, <|constrain|> or <|call|>", ids)
	}
	if got := m.Decode(ids, false); got != text {
		t.Errorf("decode = %q", got)
	}
	if got := m.Decode(ids, true); got != "assistantanalysisThink.assistantcommentary to=functions.get_weather json{\"x\":1}" {
		t.Errorf("decode skipping special = %q", got)
	}
	if m.EOS() != 200002 || !slices.Equal(m.Info().EOSIDs, []int32{200002, 199999, 200012}) {
		t.Errorf("EOS %d, EOSIDs %v", m.EOS(), m.Info().EOSIDs)
	}
	// Special tokens are plain text unless ParseSpecial is set.
	if plain := m.EncodeWith("<|end|>", Options{}); slices.Contains(plain, 200007) {
		t.Errorf("<|end|> matched without ParseSpecial: %v", plain)
	}
}

// naiveTiktoken is tiktoken's algorithm written plainly from its
// description: split with the pattern (regexp2, a backtracking engine),
// then in each piece repeatedly merge the adjacent pair whose concatenated
// bytes have the lowest rank, leftmost first.
type naiveTiktoken struct {
	re    *regexp2.Regexp
	ranks map[string]int32
}

func newNaiveTiktoken(t testing.TB, tk *tokfile.Tiktoken) *naiveTiktoken {
	n := &naiveTiktoken{re: regexp2.MustCompile(tk.Pattern, regexp2.Unicode), ranks: map[string]int32{}}
	for r, b := range tk.Ranks {
		if b != nil {
			n.ranks[string(b)] = int32(r)
		}
	}
	return n
}

func (n *naiveTiktoken) encode(t testing.TB, s string) []int32 {
	var out []int32
	for _, m := range regexpMatches(t, n.re, s) {
		parts := [][]byte{}
		for _, b := range []byte(s[m[0]:m[1]]) {
			parts = append(parts, []byte{b})
		}
		for {
			best, bestRank := -1, int32(1<<30)
			for i := 0; i+1 < len(parts); i++ {
				if r, ok := n.ranks[string(parts[i])+string(parts[i+1])]; ok && r < bestRank {
					best, bestRank = i, r
				}
			}
			if best < 0 {
				break
			}
			parts[best] = append(append([]byte{}, parts[best]...), parts[best+1]...)
			parts = append(parts[:best+1], parts[best+2:]...)
		}
		for _, p := range parts {
			out = append(out, n.ranks[string(p)])
		}
	}
	return out
}

// TestO200kMatchesNaive compares the tokenizer with naiveTiktoken on mixed
// text (prose, code, digits, several scripts).
func TestO200kMatchesNaive(t *testing.T) {
	m := loadO200k(t, false)
	tk, err := tokfile.ReadTiktoken(testenv.SharedFile(t, o200kFile))
	if err != nil {
		t.Fatal(err)
	}
	naive := newNaiveTiktoken(t, tk)
	text := mixedText(1<<14, 7)
	for _, s := range append(splitCases, text) {
		want := naive.encode(t, s)
		if got := m.EncodeWith(s, Options{}); !slices.Equal(got, want) {
			t.Errorf("%.60q:\n got %v\nwant %v", s, got, want)
		}
	}
}

// FuzzO200k checks on arbitrary text that decode(encode(s)) == s (any
// bytes, special tokens parsed) and, for valid UTF-8, that the ids equal
// naiveTiktoken's.
func FuzzO200k(f *testing.F) {
	m := loadO200k(f, true)
	tk, err := tokfile.ReadTiktoken(testenv.SharedFile(f, o200kFile))
	if err != nil {
		f.Fatal(err)
	}
	naive := newNaiveTiktoken(f, tk)
	for _, s := range splitCases {
		f.Add(s)
	}
	f.Add("<|start|>user<|message|>hi<|end|>")
	f.Add("\xff\xfe abc \xc3")
	f.Fuzz(func(t *testing.T, s string) {
		if got := m.AppendDecode(nil, m.Encode(s, false), false); string(got) != s {
			t.Fatalf("round trip %q = %q", s, got)
		}
		if !utf8.ValidString(s) || bytes.Contains([]byte(s), []byte("\u017f")) {
			return // regexp2 folds ſ differently from tiktoken's Rust regex
		}
		want := naive.encode(t, s)
		if got := m.EncodeWith(s, Options{}); !slices.Equal(got, want) {
			t.Fatalf("%q:\n got %v\nwant %v", s, got, want)
		}
	})
}

// BenchmarkEncodeO200k measures o200k_harmony encode throughput on the
// same ~1 MB of mixed text as BenchmarkEncode, warm piece cache and cold.
//
//	go test -run XXX -bench EncodeO200k ./text/tokenizer/
func BenchmarkEncodeO200k(b *testing.B) {
	text := mixedText(1<<20, 42)
	m := loadO200k(b, true)
	dst := make([]int32, 0, len(text))
	b.Run("warm", func(b *testing.B) {
		dst = m.AppendEncode(dst[:0], text, Options{})
		b.SetBytes(int64(len(text)))
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			dst = m.AppendEncode(dst[:0], text, Options{})
		}
		cpu.report(b, len(text))
		b.ReportMetric(float64(len(dst)), "tokens")
	})
	b.Run("cold", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			b.StopTimer()
			m.cache = newPieceCache()
			b.StartTimer()
			dst = m.AppendEncode(dst[:0], text, Options{})
		}
	})
}

func TestFromTiktokenErrors(t *testing.T) {
	tk := func() *tokfile.Tiktoken {
		ranks := make([][]byte, 256)
		for i := range ranks {
			ranks[i] = []byte{byte(i)}
		}
		return &tokfile.Tiktoken{Pattern: PatternO200k, Special: map[string]int{}, Ranks: ranks}
	}
	tests := []struct {
		name string
		edit func(*tokfile.Tiktoken, *TiktokenOptions)
		want string
	}{
		{"no pattern", func(t *tokfile.Tiktoken, _ *TiktokenOptions) { t.Pattern = "" }, "pat_str"},
		{"bad pattern", func(t *tokfile.Tiktoken, _ *TiktokenOptions) { t.Pattern = "(" }, "pat_str"},
		{"missing byte", func(t *tokfile.Tiktoken, _ *TiktokenOptions) { t.Ranks[7] = nil }, "byte 0x07"},
		{"special on rank", func(t *tokfile.Tiktoken, _ *TiktokenOptions) { t.Special["<|x|>"] = 3 }, "also a rank"},
		{"special range", func(_ *tokfile.Tiktoken, o *TiktokenOptions) { o.Special = map[string]int{"<|x|>": -1} }, "out of range"},
		{"eos range", func(_ *tokfile.Tiktoken, o *TiktokenOptions) { o.EOS = []int32{9999} }, "eos id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, o := tk(), TiktokenOptions{}
			tc.edit(k, &o)
			if _, err := FromTiktoken(k, o); err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
				t.Errorf("err = %v, want mention of %q", err, tc.want)
			}
		})
	}
	m, err := FromTiktoken(tk(), TiktokenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.EncodeWith("ab", Options{}); !slices.Equal(got, []int32{'a', 'b'}) {
		t.Errorf("bytes-only encoding: %v", got)
	}
}

// BenchmarkLoadO200kHarmony measures building o200k_harmony from the rank
// file (reading, 446k merges, 1090 special tokens).
//
//	go test -run XXX -bench LoadO200kHarmony -benchtime 3x ./text/tokenizer/
func BenchmarkLoadO200kHarmony(b *testing.B) {
	path := testenv.SharedFile(b, o200kFile)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadO200kHarmony(path); err != nil {
			b.Fatal(err)
		}
	}
}
