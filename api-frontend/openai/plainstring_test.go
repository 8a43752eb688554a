package openai

import (
	"encoding/json"
	"testing"
)

// TestPlainString: the decoder-free path takes exactly the literals that
// need no unescaping, and gives what json.Unmarshal gives.
func TestPlainString(t *testing.T) {
	cases := []struct {
		raw    string
		wantOK bool
	}{
		{`""`, true},
		{`"Once upon a time"`, true},
		{`"héllo ✓ 日本"`, true},
		{`"tab\there"`, false},       // escape
		{`"quote \" inside"`, false}, // escape
		{`"\u00e9"`, false},          // unicode escape
		{"\"bad \xff utf8\"", false}, // json.Unmarshal replaces it
		{"\"ctl \x01\"", false},      // invalid JSON: left to the decoder
		{`"unterminated`, false},     // not a literal
		{`x`, false},                 // not a literal
		{`"a" "b"`, false},           // an inner quote
	}
	for _, tc := range cases {
		s, ok := plainString([]byte(tc.raw))
		if ok != tc.wantOK {
			t.Errorf("plainString(%q) ok = %v, want %v", tc.raw, ok, tc.wantOK)
			continue
		}
		if !ok {
			continue
		}
		var want string
		if err := json.Unmarshal([]byte(tc.raw), &want); err != nil {
			t.Fatalf("%q: %v", tc.raw, err)
		}
		if s != want {
			t.Errorf("plainString(%q) = %q, json.Unmarshal gives %q", tc.raw, s, want)
		}
	}
}

// FuzzPlainString: for any valid JSON string literal, parsePrompt's fast
// path and json.Unmarshal agree whenever the fast path answers.
func FuzzPlainString(f *testing.F) {
	for _, s := range []string{`""`, `"abc"`, `"a\nb"`, "\"\xff\"", `"\u2028"`, `"日本"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, ok := plainString(raw)
		var want string
		err := json.Unmarshal(raw, &want)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("plainString took %q, which json.Unmarshal refuses: %v", raw, err)
		}
		if s != want {
			t.Fatalf("plainString(%q) = %q, json.Unmarshal gives %q", raw, s, want)
		}
	})
}
