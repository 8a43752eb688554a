package anthropic

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/outputproc"
)

var update = flag.Bool("update", false, "rewrite testdata goldens")

func testMeta() *Meta {
	n := 0
	return &Meta{ID: "msg_test", Model: "demo",
		Seal:  func(s string) string { return fmt.Sprintf("sig%d", len(s)) },
		NewID: func(p string) string { n++; return fmt.Sprintf("%s%d", p, n) }}
}

func script() []outputproc.Delta {
	u := outputproc.Usage{PromptTokens: 12, CachedTokens: 4}
	return []outputproc.Delta{
		{First: true, Reasoning: "Think ", Usage: u},
		{Reasoning: "<b>hard</b>\n", Usage: u},
		{Content: "Let me \"check\"", Usage: u},
		{Content: " — café.\n", Usage: u},
		{ToolCalls: []outputproc.ToolCallDelta{{Index: 0, ID: "toolu_a", Name: "get_weather", Arguments: `{"city": "Pa`}}, Usage: u},
		{ToolCalls: []outputproc.ToolCallDelta{{Index: 0, Arguments: `ris"}`}, {Index: 1, ID: "toolu_b", Name: "get_time"}}, Usage: u},
		{ToolCalls: []outputproc.ToolCallDelta{{Index: 1, Arguments: `{}`}}, Finish: outputproc.Finish{Reason: outputproc.FinishToolCalls}, Usage: u},
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n got: %s\nwant: %s", name, got, want)
	}
}

// events parses SSE blocks, checking each event line against its data.
func events(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, block := range strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n") {
		lines := strings.Split(block, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "event: ") || !strings.HasPrefix(lines[1], "data: ") {
			t.Fatalf("bad SSE block %q", block)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[1][6:]), &m); err != nil {
			t.Fatalf("%q: %v", lines[1], err)
		}
		if m["type"] != lines[0][7:] {
			t.Fatalf("event %q data type %v", lines[0], m["type"])
		}
		out = append(out, m)
	}
	return out
}

// TestStreamGolden pins a whole Messages stream, checks the event grammar
// (message_start, balanced content blocks, message_delta, message_stop),
// that partial_json fragments add up to the body's input, and that the
// body matches the stream.
func TestStreamGolden(t *testing.T) {
	s := NewStream(testMeta())
	var b []byte
	u := outputproc.Usage{PromptTokens: 12, CompletionTokens: 30, CachedTokens: 4}
	for _, d := range script() {
		b = s.AppendDelta(b, &d)
	}
	b = s.AppendEnd(b, &u)
	golden(t, "stream.golden", b)
	evs := events(t, b)
	if evs[0]["type"] != "message_start" || evs[len(evs)-1]["type"] != "message_stop" || evs[len(evs)-2]["type"] != "message_delta" {
		t.Fatalf("event order: first %v last %v", evs[0]["type"], evs[len(evs)-1]["type"])
	}
	open := -1
	partial := map[int]string{}
	for _, e := range evs {
		switch e["type"] {
		case "content_block_start":
			if open >= 0 {
				t.Fatalf("block %v starts inside block %d", e["index"], open)
			}
			open = int(e["index"].(float64))
		case "content_block_delta":
			if int(e["index"].(float64)) != open {
				t.Fatalf("delta for block %v while %d is open", e["index"], open)
			}
			d := e["delta"].(map[string]any)
			if d["type"] == "input_json_delta" {
				partial[open] += d["partial_json"].(string)
			}
		case "content_block_stop":
			open = -1
		}
	}
	var acc outputproc.Accumulator
	for _, d := range script() {
		acc.Add(&d)
	}
	body := NewStream(testMeta()).Body([]*outputproc.Accumulator{&acc}, &u)
	golden(t, "body.golden", body)
	var msg struct {
		Content []struct {
			Type  string          `json:"type"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != "tool_use" || len(msg.Content) != 4 {
		t.Fatalf("body %s", body)
	}
	for i, c := range msg.Content {
		if c.Type == "tool_use" {
			var a, b any
			_ = json.Unmarshal(c.Input, &a)
			if json.Unmarshal([]byte(partial[i]), &b) != nil || fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("block %d: partial_json %q, input %s", i, partial[i], c.Input)
			}
		}
	}
}

func TestStopReasons(t *testing.T) {
	tests := []struct {
		name   string
		finish outputproc.Finish
		want   string
		seq    any
	}{
		{"end_turn", outputproc.Finish{Reason: outputproc.FinishStop}, "end_turn", nil},
		{"max_tokens", outputproc.Finish{Reason: outputproc.FinishLength}, "max_tokens", nil},
		{"stop_sequence", outputproc.Finish{Reason: outputproc.FinishStop, Stop: outputproc.StopReason{IsText: true, Text: "END"}}, "stop_sequence", "END"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var acc outputproc.Accumulator
			acc.Add(&outputproc.Delta{First: true, Content: "hi", Finish: tc.finish})
			body := NewStream(testMeta()).Body([]*outputproc.Accumulator{&acc}, &outputproc.Usage{PromptTokens: 2, CompletionTokens: 1})
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatal(err)
			}
			if m["stop_reason"] != tc.want || m["stop_sequence"] != tc.seq {
				t.Errorf("stop_reason %v stop_sequence %v", m["stop_reason"], m["stop_sequence"])
			}
		})
	}
}

func TestErrorShape(t *testing.T) {
	s := NewStream(testMeta())
	b := s.AppendDelta(nil, &outputproc.Delta{First: true, Content: "partial"})
	b = s.AppendError(b, openai.NewError(503, "engine went away"))
	evs := events(t, b)
	last := evs[len(evs)-1]
	if last["type"] != "error" || last["error"].(map[string]any)["type"] != "overloaded_error" {
		t.Fatalf("last event %v", last)
	}
	if evs[len(evs)-2]["type"] != "content_block_stop" || !strings.Contains(string(b), `"text":"partial"`) {
		t.Fatalf("generated text not flushed before the error: %s", b)
	}
	for status, want := range map[int]string{400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error"} {
		var m map[string]any
		if err := json.Unmarshal(AppendError(nil, openai.NewError(status, "x")), &m); err != nil || m["error"].(map[string]any)["type"] != want {
			t.Errorf("status %d: %v", status, m)
		}
	}
}

// TestAppendDeltaAllocs: a text delta on an open block allocates nothing
// per token (beyond the amortized growth of the block's text).
func TestAppendDeltaAllocs(t *testing.T) {
	s := NewStream(testMeta())
	buf := s.AppendDelta(nil, &outputproc.Delta{First: true, Content: "start"})
	d := outputproc.Delta{Content: " token"}
	allocs := testing.AllocsPerRun(2000, func() {
		buf = s.AppendDelta(buf[:0], &d)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per delta", allocs)
	}
}
