package tokenizer

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// splitCases are inputs that exercise every alternative of the split regexes.
var splitCases = []string{
	"", " ", "  ", "   ", "\t", "\n", "\n\n", "\t\n", " \n", "\n \n  ", "a", " a", "  a", "\ta", "\na",
	"Hello world", " Hello World!", "Hello, world!", "I'm can't we'll they've he'd she's", "I'M CAN'T WE'LL",
	"'s 's' ''s", "x'sy", "123 4567 89012", " 1234567", "a1b22c333", "3.14159", "ied 4 ½ months", "Führer",
	"   Hello\n    Hello", "(((((", "!!!!!!!\n\n", "\r\n\r\n  x", "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ 🦙🦙 3 33 333 3333",
	"Hello\n\n\n  world  ", "\u00a0x\u3000y\u2028", "x\u00a0\u00a0", "<|im_start|>user", "\x00\x01 \x7f",
	"ᄀ가 Ⅻ ¼ ٣ 𝟘", "a  \n\n  b", "   \t\t\n", "x!?\n\n!", " !\r\r", "'ll've're", "Я тоже люблю",
	// o200k: case runs, marks, titlecase, modifier letters, "/" tails.
	"UPPER lower MiXeD CamelCase snake_case", "HTTPServer's ABC'S", "ǅungla ǈ", "ẞ İstanbul", "a\u0301 \u0301x \u0301\u0301",
	"x\u0301Y\u0301", "ʰʰA", "AʰB", "https://a.b/c//\n", " ///\r\n", "ﬁ ligature", "नमस्ते दुनिया", "مرحبا بالعالم",
	"ABC's", "Ab'Cd", "1'd", " 'S", "A\u0301'll", "\u0301", " \u0301",
}

func regexpMatches(t testing.TB, re *regexp2.Regexp, s string) [][2]int {
	t.Helper()
	idx, err := re.FindAllStringIndex(s, -1)
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]int
	for _, m := range idx {
		out = append(out, [2]int{m[0], m[1]})
	}
	return out
}

var familyPatterns = []struct {
	name    string
	pattern string
	f       splitFamily
}{
	{"gpt2", PatternGPT2, familyGPT2},
	{"llama3", PatternLlama3, familyLlama3},
	{"qwen2", PatternQwen2, familyQwen2},
	{"o200k", PatternO200k, familyO200k},
}

// TestFamilyMatchesRegexp checks the hand-written matchers against a
// backtracking regex engine running the original patterns.
func TestFamilyMatchesRegexp(t *testing.T) {
	for _, fp := range familyPatterns {
		re := regexp2.MustCompile(fp.pattern, regexp2.Unicode)
		for _, s := range splitCases {
			want := regexpMatches(t, re, s)
			got := familySplitter{fp.f}.matches(s, nil)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s %q:\n got %v\nwant %v", fp.name, s, got, want)
			}
		}
	}
}

func FuzzFamilyMatchesRegexp(f *testing.F) {
	for _, s := range splitCases {
		f.Add(s)
	}
	res := make([]*regexp2.Regexp, len(familyPatterns))
	for i, fp := range familyPatterns {
		res[i] = regexp2.MustCompile(fp.pattern, regexp2.Unicode)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // regexp2 decodes invalid bytes differently
		}
		timer := time.AfterFunc(3*time.Second, func() { panic(fmt.Sprintf("stuck on %q", s)) })
		defer timer.Stop()
		for i, fp := range familyPatterns {
			want := regexpMatches(t, res[i], s)
			got := familySplitter{fp.f}.matches(s, nil)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s %q:\n got %v\nwant %v", fp.name, s, got, want)
			}
		}
	})
}

func TestApplyBehavior(t *testing.T) {
	s := "▁a▁▁b▁"
	ms := literalSplitter{"▁"}.matches(s, nil)
	tests := []struct {
		b      splitBehavior
		invert bool
		want   []string
	}{
		{behaviorIsolated, false, []string{"▁", "a", "▁", "▁", "b", "▁"}},
		{behaviorRemoved, false, []string{"a", "b"}},
		{behaviorMergedWithPrevious, false, []string{"▁", "a▁", "▁", "b▁"}},
		{behaviorMergedWithNext, false, []string{"▁a", "▁", "▁b", "▁"}},
		{behaviorContiguous, false, []string{"▁", "a", "▁▁", "b", "▁"}},
		{behaviorRemoved, true, []string{"▁", "▁", "▁", "▁"}},
	}
	for _, tc := range tests {
		got := applyBehavior(s, ms, tc.b, tc.invert, nil)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("behavior %d invert %v: got %q, want %q", tc.b, tc.invert, got, tc.want)
		}
	}
}

// TestRegexFallback checks that an unrecognised pattern goes through
// regexp2 with the same result as the hand-written matcher.
func TestRegexFallback(t *testing.T) {
	// Same language as PatternLlama3, spelled differently.
	sp, err := newSplitter(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+?`, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sp.(regexSplitter); !ok {
		t.Fatalf("got %T, want the regexp2 fallback", sp)
	}
	for _, s := range splitCases {
		want := familySplitter{familyLlama3}.matches(s, nil)
		// \s+? differs from \s+ only where \s+(?!\S) failed on a
		// single whitespace char, where both match that one char.
		got := sp.matches(s, nil)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%q:\n got %v\nwant %v", s, got, want)
		}
	}
	if _, err := newSplitter(`(`, ""); err == nil {
		t.Error("bad regex compiled")
	}
}

// TestGGUFPreNames checks that every tokenizer.ggml.pre name llama.cpp
// knows compiles, and that the regexp2-driven ones split losslessly.
func TestGGUFPreNames(t *testing.T) {
	for _, name := range []string{"", "default", "llama3", "llama-bpe", "dbrx", "smaug-bpe", "chatglm-bpe", "gpt-2", "olmo",
		"qwen2", "megrez", "deepseek-r1-qwen", "starcoder", "smollm", "falcon", "deepseek-coder", "deepseek-v3", "bloom", "viking", "tekken"} {
		pt, err := ggufPre(name)
		if err != nil {
			t.Errorf("%q: %v", name, err)
			continue
		}
		for _, p := range pt.patterns {
			sp, err := newSplitter(p, "")
			if err != nil {
				t.Errorf("%q: %v", name, err)
				continue
			}
			for _, s := range splitCases {
				pieces := applyBehavior(s, sp.matches(s, nil), behaviorIsolated, false, nil)
				if strings.Join(pieces, "") != s {
					t.Errorf("%q on %q: pieces %q lose text", name, s, pieces)
				}
			}
		}
	}
	if _, err := ggufPre("no-such-pre"); err == nil {
		t.Error("unknown pre accepted")
	}
}
