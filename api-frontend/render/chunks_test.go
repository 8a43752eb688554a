package render

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/ipc"
)

var update = flag.Bool("update", false, "rewrite the golden files")

type textTok struct{}

func (textTok) TokenBytes(id int32) []byte {
	switch id {
	case 1:
		return []byte("Hello")
	case 2:
		return []byte(" wörld")
	case 3:
		return []byte{0xe2, 0x82} // partial UTF-8
	}
	return []byte("\"q\"\n")
}

// transcript renders a fixed set of streams the way the server does.
func transcript() []byte {
	var b []byte
	h := NewStreamHeader("chatcmpl-abc", "chat.completion.chunk", 1700000000, "demo")
	b = AppendChatChunk(b, &h, &ChatChoice{Index: 0, Role: "assistant", Content: "Hello", HasContent: true}, nil)
	b = AppendChatChunk(b, &h, &ChatChoice{Index: 1, Role: "assistant", Content: "", HasContent: true}, &Usage{PromptTokens: 5, CompletionTokens: 1})
	b = AppendChatChunk(b, &h, &ChatChoice{Index: 0, Reasoning: "hmm <think>", HasReasoning: true, Content: "x", HasContent: true}, nil)
	b = AppendChatChunk(b, &h, &ChatChoice{Index: 0, ReasoningField: "reasoning_content", Reasoning: "r", HasReasoning: true}, nil)
	b = AppendChatChunk(b, &h, &ChatChoice{Index: 0, ToolCalls: []ToolCallDelta{{Index: 0, ID: "call-1", Name: "get_weather", Arguments: `{"city": "Par`}}}, nil)
	b = AppendChatChunk(b, &h, &ChatChoice{Index: 0, ToolCalls: []ToolCallDelta{{Index: 0, Arguments: `is"}`}}, FinishReason: "tool_calls"}, nil)
	lp := &Logprobs{TokenIDs: []int32{1, 2}, Entries: []ipc.TokenLogprobs{{Logprob: -0.25, TopIDs: []int32{1, 3}, TopLogprobs: []float32{-0.25, -2}}, {Logprob: -1, TopIDs: []int32{2}, TopLogprobs: []float32{-1}}}, Tok: textTok{}}
	b = AppendChatChunk(b, &h, &ChatChoice{Index: 0, Content: "Hello wörld", HasContent: true, Logprobs: lp, FinishReason: "stop", StopReason: StopReason{Token: 7, IsToken: true}}, nil)
	b = AppendUsageChunk(b, &h, &Usage{PromptTokens: 5, CompletionTokens: 9, CachedTokens: 4})
	b = append(b, Done...)
	hc := NewStreamHeader("cmpl-xyz", "text_completion", 1700000001, "demo")
	b = AppendCompletionChunk(b, &hc, &CompletionChoice{Index: 0, Text: "Hello\tthere \"you\"\n\u2028"}, nil)
	lp.TextOffset = 17
	b = AppendCompletionChunk(b, &hc, &CompletionChoice{Index: 2, Text: " wörld", Logprobs: lp, FinishReason: "stop", StopReason: StopReason{Text: "END", IsText: true}}, &Usage{PromptTokens: 3, CompletionTokens: 2})
	b = AppendCompletionChunk(b, &hc, &CompletionChoice{Index: 1, Text: "\xff bad utf8", FinishReason: "length"}, nil)
	b = AppendErrorEvent(b, &openai.Error{Status: 500, Type: "InternalServerError", Message: "engine is down"})
	b = append(b, Done...)
	return b
}

func TestSSEGolden(t *testing.T) {
	got := transcript()
	path := filepath.Join("testdata", "stream.golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if string(got) != string(want) {
		t.Fatalf("SSE transcript differs from %s:\n got:\n%s\nwant:\n%s", path, got, want)
	}
	// every event is valid JSON (or [DONE])
	for _, ev := range strings.Split(strings.TrimSpace(string(got)), "\n\n") {
		d, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("bad event %q", ev)
		}
		if d != "[DONE]" && !json.Valid([]byte(d)) {
			t.Fatalf("invalid JSON: %s", d)
		}
	}
}

// BenchmarkAppendCompletionChunk renders one typical one-token chunk.
//
//	go test -run XXX -bench AppendCompletionChunk ./api-frontend/render/
func BenchmarkAppendCompletionChunk(b *testing.B) {
	h := NewStreamHeader("cmpl-0123456789abcdef01234567", "text_completion", 1700000000, "demo")
	buf := make([]byte, 0, 4096)
	c := CompletionChoice{Text: " world"}
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendCompletionChunk(buf[:0], &h, &c, nil)
	}
}

// TestStreamHeaderAllocs: a stream's chunk prefix is one allocation (it is
// made once per streamed request).
func TestStreamHeaderAllocs(t *testing.T) {
	for _, tc := range []struct{ id, object, model string }{
		{"cmpl-0123456789abcdef01234567", "text_completion", "demo"},
		{"chatcmpl-0123456789abcdef01234567", "chat.completion.chunk", "meta-llama/Llama-3.2-1B-Instruct"},
	} {
		if n := testing.AllocsPerRun(100, func() { _ = NewStreamHeader(tc.id, tc.object, 1700000000, tc.model) }); n != 1 {
			t.Errorf("NewStreamHeader(%q, %q, %q): %v allocations, want 1", tc.id, tc.object, tc.model, n)
		}
	}
}
