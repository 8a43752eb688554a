package simexec

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/ipc"
)

// byteTok is a fake tokenizer: ids 0..2 are special (BOS, EOS, PAD), id
// 3+b is byte b.
type byteTok struct{}

func (byteTok) Encode(text string, addSpecial bool) []int32 {
	var out []int32
	if addSpecial {
		out = append(out, 0)
	}
	for _, b := range []byte(text) {
		out = append(out, int32(b)+3)
	}
	return out
}

func (byteTok) Decode(ids []int32, skipSpecial bool) string {
	var sb strings.Builder
	for _, id := range ids {
		if id >= 3 {
			sb.WriteByte(byte(id - 3))
		}
	}
	return sb.String()
}

func (byteTok) TokenBytes(id int32) []byte {
	if id < 3 {
		return []byte("<s>")
	}
	return []byte{byte(id - 3)}
}
func (byteTok) IsSpecial(id int32) bool          { return id < 3 }
func (byteTok) VocabSize() int                   { return 259 }
func (byteTok) BOS() int32                       { return 0 }
func (byteTok) EOS() int32                       { return 1 }
func (byteTok) TokenID(tok string) (int32, bool) { return 0, false }

func seq(id string, hist []int32, np int, seed uint64, p *ipc.SamplingParams) sched.SeqWork {
	return sched.SeqWork{ReqID: id, Tokens: hist[len(hist)-1:], StartPos: len(hist) - 1, Sample: true,
		In: sample.Input{Params: p, History: hist, NumPrompt: np, Seed: seed}}
}

func TestDeterministicTokens(t *testing.T) {
	e, err := New(Config{Tokenizer: byteTok{}, EOSTokenIDs: []int32{1}})
	if err != nil {
		t.Fatal(err)
	}
	p := &ipc.SamplingParams{Logprobs: -1}
	hist := []int32{10, 11, 12, 13, 14}
	one := &sched.Batch{Seqs: []sched.SeqWork{seq("a", hist, 3, 42, p)}}
	out1 := make([]sample.Result, 1)
	if err := e.Execute(one, out1); err != nil {
		t.Fatal(err)
	}
	many := &sched.Batch{Seqs: []sched.SeqWork{seq("x", hist, 2, 1, p), seq("y", hist[:4], 3, 2, p), seq("a", hist, 3, 42, p)}}
	out3 := make([]sample.Result, 3)
	if err := e.Execute(many, out3); err != nil {
		t.Fatal(err)
	}
	if out3[2].Token != out1[0].Token {
		t.Fatalf("token depends on the batch: %d vs %d", out3[2].Token, out1[0].Token)
	}
	// Over many positions: ordinary, in range, varied.
	seen := map[int32]bool{}
	h := slices.Clone(hist)
	for range 500 {
		b := &sched.Batch{Seqs: []sched.SeqWork{seq("a", h, 3, 42, p)}}
		if err := e.Execute(b, out1); err != nil {
			t.Fatal(err)
		}
		tok := out1[0].Token
		if tok < 3 || tok >= 259 || tok-3 >= 0x80 {
			t.Fatalf("token %d is special, out of range or not valid UTF-8 alone", tok)
		}
		seen[tok] = true
		h = append(h, tok)
	}
	if len(seen) < 50 {
		t.Fatalf("only %d distinct tokens in 500", len(seen))
	}
}

func TestRangeAndEOS(t *testing.T) {
	e, err := New(Config{VocabSize: 100, TokenMin: 50, TokenMax: 59, EOSTokenIDs: []int32{2}, EOSProb: 1})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]sample.Result, 1)
	cases := []struct {
		name    string
		p       ipc.SamplingParams
		outputs int
		wantEOS bool
	}{
		{"eos", ipc.SamplingParams{Logprobs: -1}, 0, true},
		{"ignore_eos", ipc.SamplingParams{Logprobs: -1, IgnoreEOS: true}, 0, false},
		{"before min_tokens", ipc.SamplingParams{Logprobs: -1, MinTokens: 3}, 2, false},
		{"at min_tokens", ipc.SamplingParams{Logprobs: -1, MinTokens: 3}, 3, true},
	}
	for _, tc := range cases {
		hist := make([]int32, 4+tc.outputs)
		b := &sched.Batch{Seqs: []sched.SeqWork{seq("r", hist, 4, 7, &tc.p)}}
		if err := e.Execute(b, out); err != nil {
			t.Fatal(err)
		}
		if got := out[0].Token == 2; got != tc.wantEOS {
			t.Errorf("%s: token %d", tc.name, out[0].Token)
		}
		if !tc.wantEOS && (out[0].Token < 50 || out[0].Token > 59) {
			t.Errorf("%s: token %d outside [50, 59]", tc.name, out[0].Token)
		}
	}
	if _, err := New(Config{VocabSize: 10, TokenMin: 5, TokenMax: 20}); err == nil {
		t.Fatal("range beyond the vocabulary accepted")
	}
	if _, err := New(Config{VocabSize: 10, Script: []ScriptEntry{{}}}); err == nil {
		t.Fatal("script without tokenizer accepted")
	}
}

func TestScript(t *testing.T) {
	script, err := ParseScript([]byte(`# comment
{"match": "weather", "output": "<tool_call>{\"name\": \"get_weather\"}</tool_call>"}
{"match": "", "output": "héllo"}
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Tokenizer: byteTok{}, EOSTokenIDs: []int32{1}, Script: script})
	if err != nil {
		t.Fatal(err)
	}
	tok := byteTok{}
	run := func(id, prompt string, ignoreEOS bool, limit int) string {
		hist := tok.Encode(prompt, true)
		np := len(hist)
		p := &ipc.SamplingParams{Logprobs: -1, IgnoreEOS: ignoreEOS}
		out := make([]sample.Result, 1)
		for range limit {
			b := &sched.Batch{Seqs: []sched.SeqWork{seq(id, hist, np, 3, p)}}
			if err := e.Execute(b, out); err != nil {
				t.Fatal(err)
			}
			hist = append(hist, out[0].Token)
			if out[0].Token == 1 {
				break
			}
		}
		e.Release(id)
		return tok.Decode(hist[np:], false) + map[bool]string{true: "<eos>", false: ""}[hist[len(hist)-1] == 1]
	}
	if got := run("a", "what is the weather in Paris?", false, 100); got != `<tool_call>{"name": "get_weather"}</tool_call><eos>` {
		t.Fatalf("weather script: %q", got)
	}
	if got := run("b", "hi", false, 100); got != "héllo<eos>" {
		t.Fatalf("default script: %q", got)
	}
	if got := run("c", "hi", true, 8); !strings.HasPrefix(got, "héllo") || strings.HasSuffix(got, "<eos>") || len(got) <= len("héllo") {
		t.Fatalf("ignore_eos script: %q", got)
	}
}

func TestStepTime(t *testing.T) {
	now := time.Unix(0, 0)
	var slept time.Duration
	e, err := New(Config{
		VocabSize: 100, StepTime: 2 * time.Millisecond, PrefillPerToken: 10 * time.Microsecond, DecodePerToken: 100 * time.Microsecond,
		Now:   func() time.Time { return now },
		Sleep: func(d time.Duration) { slept += d; now = now.Add(d) },
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &ipc.SamplingParams{Logprobs: 2}
	prompt := make([]int32, 100)
	b := &sched.Batch{Seqs: []sched.SeqWork{
		{ReqID: "pre", Tokens: prompt, Sample: true, In: sample.Input{Params: p, History: prompt, NumPrompt: 100}},
		seq("dec", make([]int32, 12), 10, 1, p),
	}}
	out := make([]sample.Result, 2)
	if err := e.Execute(b, out); err != nil {
		t.Fatal(err)
	}
	want := 2*time.Millisecond + 100*10*time.Microsecond + 100*time.Microsecond
	if slept != want {
		t.Fatalf("slept %v, want %v", slept, want)
	}
	if lp := out[0].Logprobs; lp.Rank != 1 || len(lp.TopIDs) != 2 || lp.TopIDs[0] != out[0].Token {
		t.Fatalf("synthetic logprobs %+v", lp)
	}
}

func TestParseScriptErrors(t *testing.T) {
	for _, bad := range []string{`{"match": 1}`, `{"match": "a", "extra": 1}`, `not json`} {
		if _, err := ParseScript([]byte(bad), "s"); err == nil || !strings.Contains(err.Error(), "s:1") {
			t.Errorf("%q: error %v, want one naming s:1", bad, err)
		}
	}
}

// FuzzParseScript: any input gives entries or an error, never a panic.
func FuzzParseScript(f *testing.F) {
	f.Add([]byte(`{"match": "a", "output": "b"}`))
	f.Add([]byte("# x\n\n{\"output\": \"\\u00e9\"}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := ParseScript(data, "fuzz")
		if err == nil && len(entries) > strings.Count(string(data), "\n")+1 {
			t.Fatalf("%d entries from %d lines", len(entries), strings.Count(string(data), "\n")+1)
		}
	})
}

// setMask is a sample.Mask over an explicit id set; sparse reports whether
// AllowedIDs returns the set (as a small mask would) or nil (a large one).
type setMask struct {
	ids    []int32
	sparse bool
}

func (m setMask) Allowed(id int32) bool { return slices.Contains(m.ids, id) }
func (m setMask) AllowedIDs() []int32 {
	if m.sparse {
		return m.ids
	}
	return nil
}

// TestMaskApplied: a structured-output mask always wins over the hashed or
// scripted token (issue 21 item 8: the sim used to ignore masks, so every
// structured output failed with "guide: token N rejected").
func TestMaskApplied(t *testing.T) {
	script := []ScriptEntry{{Match: "scripted", Output: "zzzz"}}
	e, err := New(Config{Tokenizer: byteTok{}, EOSTokenIDs: []int32{1}, Script: script})
	if err != nil {
		t.Fatal(err)
	}
	prompt := byteTok{}.Encode("plain", false)
	scripted := byteTok{}.Encode("scripted", false)
	cases := []struct {
		name   string
		prompt []int32
		params *ipc.SamplingParams
		mask   sample.Mask
		want   func(int32) bool
	}{
		{"sparse mask", prompt, &ipc.SamplingParams{}, setMask{ids: []int32{'{' + 3, '[' + 3}, sparse: true}, func(id int32) bool { return id == '{'+3 || id == '['+3 }},
		{"dense mask", prompt, &ipc.SamplingParams{}, setMask{ids: []int32{'"' + 3}}, func(id int32) bool { return id == '"'+3 }},
		{"special only", prompt, &ipc.SamplingParams{}, setMask{ids: []int32{2}}, func(id int32) bool { return id == 2 }},
		{"EOS allowed", prompt, &ipc.SamplingParams{}, setMask{ids: []int32{1, 'x' + 3}}, func(id int32) bool { return id == 1 }},
		{"EOS allowed but ignore_eos", prompt, &ipc.SamplingParams{IgnoreEOS: true}, setMask{ids: []int32{1, 'x' + 3}}, func(id int32) bool { return id == 'x'+3 }},
		{"EOS allowed but min_tokens", prompt, &ipc.SamplingParams{MinTokens: 5}, setMask{ids: []int32{1, 'x' + 3}}, func(id int32) bool { return id == 'x'+3 }},
		{"scripted token masked", scripted, &ipc.SamplingParams{}, setMask{ids: []int32{'a' + 3}}, func(id int32) bool { return id == 'a'+3 }},
		{"scripted token allowed", scripted, &ipc.SamplingParams{}, setMask{ids: []int32{'z' + 3, 'a' + 3}}, func(id int32) bool { return id == 'z'+3 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(0); seed < 20; seed++ {
				sw := seq("r-"+tc.name, tc.prompt, len(tc.prompt), seed, tc.params)
				sw.In.Mask = tc.mask
				out := make([]sample.Result, 1)
				if err := e.Execute(&sched.Batch{Seqs: []sched.SeqWork{sw}}, out); err != nil {
					t.Fatal(err)
				}
				if !tc.want(out[0].Token) {
					t.Fatalf("seed %d: picked %d", seed, out[0].Token)
				}
				again := make([]sample.Result, 1)
				_ = e.Execute(&sched.Batch{Seqs: []sched.SeqWork{sw}}, again)
				if again[0].Token != out[0].Token {
					t.Fatalf("seed %d: not deterministic: %d then %d", seed, out[0].Token, again[0].Token)
				}
			}
		})
	}
}
