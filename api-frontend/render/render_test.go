package render

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/outputproc"
)

// rendererCases are delta sequences rendered by each OpenAI renderer, as
// a stream (AppendDelta…, then AppendEnd or AppendError) and as a body.
var rendererCases = []struct {
	name   string
	chat   bool
	req    Request
	deltas []outputproc.Delta
	fail   *openai.Error
}{
	{
		name: "completions_logprobs_usage",
		req:  Request{ID: "cmpl-1", Created: 1700000000, Model: "demo", Logprobs: true, Tok: textTok{}, IncludeUsage: true, ContinuousUsage: true},
		deltas: []outputproc.Delta{
			{Index: 0, First: true, Content: "Hello", TokenIDs: []int32{1}, Logprobs: []ipc.TokenLogprobs{{Logprob: -0.25, TopIDs: []int32{1}, TopLogprobs: []float32{-0.25}}}, Usage: outputproc.Usage{PromptTokens: 3, CompletionTokens: 1}},
			{Index: 1, First: true, Content: "", TokenIDs: nil, Usage: outputproc.Usage{PromptTokens: 3}},
			{Index: 0, Content: " wörld", TokenIDs: []int32{2}, Logprobs: []ipc.TokenLogprobs{{Logprob: -1}}, Finish: outputproc.Finish{Reason: outputproc.FinishStop, Stop: outputproc.StopReason{Text: "END", IsText: true}}, Usage: outputproc.Usage{PromptTokens: 3, CompletionTokens: 2, CachedTokens: 2}},
			{Index: 1, Content: "x", TokenIDs: []int32{4}, Logprobs: []ipc.TokenLogprobs{{Logprob: -2}}, Finish: outputproc.Finish{Reason: outputproc.FinishLength}, Usage: outputproc.Usage{PromptTokens: 3, CompletionTokens: 1}},
		},
	},
	{
		name: "chat_reasoning_tools",
		chat: true,
		req:  Request{ID: "chatcmpl-2", Created: 1700000001, Model: "demo", Reasoning: true, ReasoningField: "reasoning_content"},
		deltas: []outputproc.Delta{
			{First: true, Reasoning: "think", TokenIDs: []int32{1, 2}},
			{Content: "", TokenIDs: []int32{3}}, // held back by a parser: nothing to send
			{Content: "Sure.", ToolCalls: []outputproc.ToolCallDelta{{Index: 0, ID: "call_1", Name: "get_weather", Arguments: `{"city": "Par`}}},
			{ToolCalls: []outputproc.ToolCallDelta{{Index: 0, Arguments: `is"}`}}, Finish: outputproc.Finish{Reason: outputproc.FinishToolCalls}, Usage: outputproc.Usage{PromptTokens: 9, CompletionTokens: 7}},
		},
	},
	{
		name: "chat_engine_error",
		chat: true,
		req:  Request{ID: "chatcmpl-3", Created: 1700000002, Model: "demo"},
		deltas: []outputproc.Delta{
			{First: true, Content: "partial", TokenIDs: []int32{1}},
			{Content: " text", TokenIDs: []int32{2}, Finish: outputproc.Finish{Reason: outputproc.FinishError, Error: "engine is down"}},
		},
		fail: &openai.Error{Status: 500, Type: "InternalServerError", Message: "engine is down"},
	},
}

// TestRenderersGolden renders every case as a stream and as a body and
// compares with testdata/renderers/<case>.golden (-update rewrites them).
func TestRenderersGolden(t *testing.T) {
	for _, c := range rendererCases {
		t.Run(c.name, func(t *testing.T) {
			var rend Renderer = NewCompletions(c.req)
			if c.chat {
				rend = NewChat(c.req)
			}
			var b []byte
			accs := map[int]*outputproc.Accumulator{}
			var order []*outputproc.Accumulator
			u := outputproc.Usage{}
			for i := range c.deltas {
				d := &c.deltas[i]
				b = rend.AppendDelta(b, d)
				if accs[d.Index] == nil {
					accs[d.Index] = &outputproc.Accumulator{}
					order = append(order, accs[d.Index])
				}
				accs[d.Index].Add(d)
				if d.Finished() {
					u.PromptTokens = d.Usage.PromptTokens
					u.CompletionTokens += d.Usage.CompletionTokens
					u.CachedTokens = max(u.CachedTokens, d.Usage.CachedTokens)
				}
			}
			if c.fail != nil {
				b = rend.AppendError(b, c.fail)
			} else {
				b = rend.AppendEnd(b, &u)
			}
			for _, ev := range strings.Split(strings.TrimSpace(string(b)), "\n\n") {
				if d, ok := strings.CutPrefix(ev, "data: "); !ok || (d != "[DONE]" && !json.Valid([]byte(d))) {
					t.Fatalf("bad event %q", ev)
				}
			}
			if !strings.HasSuffix(string(b), Done) {
				t.Fatalf("stream does not end with [DONE]")
			}
			got := string(b)
			if c.fail == nil {
				body := rend.Body(order, &u)
				if !json.Valid(body) {
					t.Fatalf("invalid body %s", body)
				}
				got += "body: " + string(body) + "\n"
			}
			path := filepath.Join("testdata", "renderers", c.name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (run with -update to create): %v", err)
			}
			if got != string(want) {
				t.Fatalf("rendered bytes differ from %s:\n got:\n%s\nwant:\n%s", path, got, want)
			}
		})
	}
}
