package dataset

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }

func TestRandomLengths(t *testing.T) {
	o := RandomOptions{NumPrompts: 500, InputLen: 100, OutputLen: 50, RangeRatio: 0.2, PromptIDs: true}
	samples, err := Random(o, nil, newRand(1))
	if err != nil {
		t.Fatal(err)
	}
	seenIn := map[int]bool{}
	for i, s := range samples {
		if s.PromptLen < 80 || s.PromptLen > 120 || len(s.PromptIDs) != s.PromptLen {
			t.Fatalf("sample %d: prompt len %d (%d ids), want in [80, 120]", i, s.PromptLen, len(s.PromptIDs))
		}
		if s.OutputLen < 40 || s.OutputLen > 60 {
			t.Fatalf("sample %d: output len %d, want in [40, 60]", i, s.OutputLen)
		}
		for _, id := range s.PromptIDs {
			if id < minRandomID || id >= maxRandomID {
				t.Fatalf("id %d outside [%d, %d)", id, minRandomID, maxRandomID)
			}
		}
		seenIn[s.PromptLen] = true
	}
	if !seenIn[80] || !seenIn[120] || len(seenIn) < 30 {
		t.Errorf("input lengths cover %d values, want the whole range [80, 120] inclusive", len(seenIn))
	}
	again, _ := Random(o, nil, newRand(1))
	if !slices.Equal(samples[7].PromptIDs, again[7].PromptIDs) {
		t.Error("same seed gave different prompts")
	}
}

func TestRandomText(t *testing.T) {
	words, err := Random(RandomOptions{NumPrompts: 3, InputLen: 12, OutputLen: 4}, nil, newRand(2))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(words[0].Prompt)); n != 12 || words[0].PromptIDs != nil {
		t.Errorf("word prompt has %d words, want 12: %q", n, words[0].Prompt)
	}
	tok := WordTokenizer{}
	withTok, err := Random(RandomOptions{NumPrompts: 3, InputLen: 12, OutputLen: 4}, tok, newRand(2))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range withTok {
		if n := len(tok.Encode(s.Prompt, false)); n != 12 || s.PromptLen != 12 {
			t.Errorf("tokenizer prompt encodes to %d tokens (PromptLen %d), want 12: %q", n, s.PromptLen, s.Prompt)
		}
	}
}

func TestRandomValidate(t *testing.T) {
	for _, o := range []RandomOptions{
		{NumPrompts: 0, InputLen: 1, OutputLen: 1},
		{NumPrompts: 1, InputLen: 0, OutputLen: 1},
		{NumPrompts: 1, InputLen: 1, OutputLen: 0},
		{NumPrompts: 1, InputLen: 1, OutputLen: 1, RangeRatio: 1},
	} {
		if _, err := Random(o, nil, newRand(1)); err == nil {
			t.Errorf("Random(%+v) accepted", o)
		}
	}
}

func TestShareGPT(t *testing.T) {
	samples, err := Load("sharegpt", filepath.Join("testdata", "sharegpt.json"), FileOptions{NumPrompts: 10}, WordTokenizer{}, newRand(3))
	if err != nil {
		t.Fatal(err)
	}
	// "hi" is under 4 tokens and the one-turn conversation has no answer.
	if len(samples) != 2 {
		t.Fatalf("%d samples, want 2: %+v", len(samples), samples)
	}
	for _, s := range samples {
		if strings.HasPrefix(s.Prompt, "hi") || s.PromptLen != len(strings.Fields(s.Prompt)) || s.OutputLen < 4 {
			t.Errorf("sample %+v", s)
		}
	}
	fixed, err := Load("sharegpt", filepath.Join("testdata", "sharegpt.json"), FileOptions{NumPrompts: 10, OutputLen: 9}, nil, newRand(3))
	if err != nil {
		t.Fatal(err)
	}
	if len(fixed) != 3 || fixed[0].OutputLen != 9 {
		t.Errorf("with --output-len: %+v", fixed)
	}
}

func TestCustom(t *testing.T) {
	for _, tc := range []struct {
		file    string
		prompts []string
		outs    []int
	}{
		{"custom.jsonl", []string{"first prompt text", "second prompt", "first prompt text"}, []int{7, 256, 7}},
		{"custom.json", []string{"array prompt one", "array prompt two", "array prompt one"}, []int{256, 3, 256}},
	} {
		samples, err := Load("custom", filepath.Join("testdata", tc.file), FileOptions{NumPrompts: 3}, nil, newRand(1))
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		for i, s := range samples {
			if s.Prompt != tc.prompts[i] || s.OutputLen != tc.outs[i] || s.PromptLen != ApproxTokens(tc.prompts[i]) {
				t.Errorf("%s sample %d = %+v, want %q / %d", tc.file, i, s, tc.prompts[i], tc.outs[i])
			}
		}
	}
	for _, bad := range []string{`{"text": "x"}`, `{"prompt": 3}`, `[{"prompt": "a", "output_tokens": -1}]`, `not json`, ``} {
		if _, err := ParseCustom(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseCustom(%q) accepted", bad)
		}
	}
	if _, err := Load("custom", "testdata/missing.jsonl", FileOptions{NumPrompts: 1}, nil, newRand(1)); err == nil {
		t.Error("missing file accepted")
	}
}

func TestApproxTokens(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int
	}{{"", 0}, {"a b c d e", 5}, {"abcdefghij", 3}} {
		if got := ApproxTokens(tc.text); got != tc.want {
			t.Errorf("ApproxTokens(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}

// FuzzParseCustom checks the custom-dataset parser never panics and that
// every record it accepts has a prompt.
func FuzzParseCustom(f *testing.F) {
	f.Add(`{"prompt":"a"}` + "\n" + `{"prompt":"b","output_tokens":2}`)
	f.Add(`[{"prompt":"x"}]`)
	f.Fuzz(func(t *testing.T, s string) {
		recs, err := ParseCustom(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, r := range recs {
			if r.Prompt == nil || r.OutputTokens < 0 {
				t.Fatalf("accepted bad record %+v from %q", r, s)
			}
		}
	})
}

// FuzzParseShareGPT checks the ShareGPT parser never panics.
func FuzzParseShareGPT(f *testing.F) {
	f.Add(`[{"conversations":[{"from":"human","value":"q"},{"from":"gpt","value":"a"}]}]`)
	f.Fuzz(func(t *testing.T, s string) {
		pairs, err := ParseShareGPT(strings.NewReader(s))
		if err == nil {
			_, _ = ShareGPT(pairs, FileOptions{NumPrompts: 3}, nil, newRand(1))
		}
	})
}
