package simexec

import (
	"path/filepath"
	"testing"

	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/internal/testenv"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/text/tokenizer"
)

// TestScriptQwen3 drives tool-call markup, reasoning tags and Unicode
// through the real Qwen3 tokenizer: the emitted ids decode back to the
// scripted text exactly, then EOS.
func TestScriptQwen3(t *testing.T) {
	path := testenv.SharedFile(t, "tokenizers/qwen3/tokenizer.json")
	tok, err := tokenizer.Load(filepath.Dir(path), "")
	if err != nil {
		t.Fatal(err)
	}
	want := "<think>\nLet me check… 天气?\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\"}}\n</tool_call>"
	script := []ScriptEntry{{Match: "weather in", Output: want}, {Match: "", Output: "fallback"}}
	eos := tok.Info().EOSIDs
	if len(eos) == 0 {
		t.Fatal("qwen3 tokenizer has no EOS")
	}
	e, err := New(Config{Tokenizer: tok, EOSTokenIDs: eos, Script: script})
	if err != nil {
		t.Fatal(err)
	}
	hist := tok.Encode("<|im_start|>user\nWhat is the weather in Zürich?<|im_end|>\n<|im_start|>assistant\n", false)
	np := len(hist)
	p := &ipc.SamplingParams{Logprobs: -1}
	out := make([]sample.Result, 1)
	for range 200 {
		b := &sched.Batch{Seqs: []sched.SeqWork{{ReqID: "q", Tokens: hist[len(hist)-1:], StartPos: len(hist) - 1, Sample: true,
			In: sample.Input{Params: p, History: hist, NumPrompt: np, Seed: 1}}}}
		if err := e.Execute(b, out); err != nil {
			t.Fatal(err)
		}
		hist = append(hist, out[0].Token)
		if out[0].Token == eos[0] {
			break
		}
	}
	if hist[len(hist)-1] != eos[0] {
		t.Fatal("script did not end with EOS")
	}
	if got := tok.Decode(hist[np:len(hist)-1], false); got != want {
		t.Fatalf("decoded %q, want %q", got, want)
	}
}
