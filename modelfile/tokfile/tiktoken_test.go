package tokfile

import (
	"strings"
	"testing"
)

func TestParseTiktoken(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		pattern string
		ranks   []string
		special map[string]int
	}{
		{"plain", "YQ== 0\nYg== 1\r\nYWI= 2\n", "", []string{"a", "b", "ab"}, map[string]int{}},
		{"plain gap", "YQ== 0\nYWI= 2\n", "", []string{"a", "", "ab"}, map[string]int{}},
		{"json", `{"pat_str":"\\s+","special_tokens":{"<|e|>":5},"bpe_ranks":"! 0 YQ== Yg==\n! 2 YWI="}`, `\s+`,
			[]string{"a", "b", "ab"}, map[string]int{"<|e|>": 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tk, err := ParseTiktoken([]byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			if tk.Pattern != tc.pattern {
				t.Errorf("pattern %q, want %q", tk.Pattern, tc.pattern)
			}
			var got []string
			for _, r := range tk.Ranks {
				got = append(got, string(r))
			}
			if strings.Join(got, "|") != strings.Join(tc.ranks, "|") {
				t.Errorf("ranks %q, want %q", got, tc.ranks)
			}
			if len(tk.Special) != len(tc.special) {
				t.Errorf("special %v, want %v", tk.Special, tc.special)
			}
			for k, v := range tc.special {
				if tk.Special[k] != v {
					t.Errorf("special %v, want %v", tk.Special, tc.special)
				}
			}
		})
	}
}

func TestReadTiktoken(t *testing.T) {
	tk, err := ReadTiktoken("testdata/tiny.tiktoken")
	if err != nil {
		t.Fatal(err)
	}
	if len(tk.Ranks) != 3 || string(tk.Ranks[2]) != "ab" {
		t.Errorf("ranks %q", tk.Ranks)
	}
	if _, err := ReadTiktoken("testdata/missing.tiktoken"); err == nil || !strings.Contains(err.Error(), "read tiktoken file") {
		t.Errorf("missing file: err = %v", err)
	}
}

func TestParseTiktokenErrors(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"empty", "", "no tokens"},
		{"bad base64", "!!! 0\n", "line 1"},
		{"bad rank", "YQ== x\n", "bad rank"},
		{"negative rank", "YQ== -1\n", "out of range"},
		{"three fields", "YQ== 0 1\n", "line 1"},
		{"dup token", "YQ== 0\nYQ== 1\n", "listed twice"},
		{"dup rank", "YQ== 0\nYg== 0\n", "rank 0 given twice"},
		{"sparse", "YQ== 0\nYg== 9000000\n", "spread over"},
		{"empty token", " 0\n", "empty token"},
		{"json syntax", `{"bpe_ranks": `, "parse tiktoken json"},
		{"json no ranks", `{"pat_str": "x"}`, "missing"},
		{"json bad special", `{"special_tokens":{"x":-1},"bpe_ranks":"! 0 YQ=="}`, "special_tokens"},
		{"json bad line", `{"bpe_ranks":"!"}`, "line 1"},
		{"json bad offset", `{"bpe_ranks":"! x YQ=="}`, "first rank"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTiktoken([]byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want mention of %q", err, tc.want)
			}
		})
	}
}

// FuzzParseTiktoken feeds arbitrary bytes (both the plain and the JSON
// form, seeded with valid files) and checks the reader never panics and
// that what it accepts is consistent: every rank's token is non-empty or a
// hole, and no token appears twice.
func FuzzParseTiktoken(f *testing.F) {
	f.Add([]byte("YQ== 0\nYg== 1\nYWI= 2\n"))
	f.Add([]byte(`{"pat_str":"\\s+","special_tokens":{"<|e|>":5},"bpe_ranks":"! 0 YQ== Yg==\n! 2 YWI="}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tk, err := ParseTiktoken(data)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for r, tok := range tk.Ranks {
			if tok == nil {
				continue
			}
			if len(tok) == 0 || seen[string(tok)] {
				t.Fatalf("rank %d: bad or repeated token %q", r, tok)
			}
			seen[string(tok)] = true
		}
	})
}
