package responses

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

// testMeta returns deterministic metadata: ids count up.
func testMeta() *Meta {
	n := 0
	return &Meta{
		ID: "resp_test", Model: "demo", CreatedAt: 1700000000, Store: true, Truncation: "disabled",
		ParallelToolCalls: true, IncludeEncrypted: true,
		Seal:        func(s string) string { return "sealed(" + s + ")" },
		NewID:       func(p string) string { n++; return fmt.Sprintf("%s%d", p, n) },
		CountTokens: func(s string) int { return len(s) },
	}
}

// script is a delta sequence with nasty splits: reasoning, prose, two
// calls whose arguments arrive in fragments.
func script() []outputproc.Delta {
	return []outputproc.Delta{
		{First: true, Reasoning: "Think "},
		{Reasoning: "<b>hard</b>\n"},
		{Content: "Let me \"check\"", Reasoning: ""},
		{Content: " — café.\n"},
		{ToolCalls: []outputproc.ToolCallDelta{{Index: 0, ID: "call_a", Name: "get_weather", Arguments: `{"city": "Pa`}}},
		{ToolCalls: []outputproc.ToolCallDelta{{Index: 0, Arguments: `ris"}`}, {Index: 1, ID: "call_b", Name: "get_time"}}},
		{ToolCalls: []outputproc.ToolCallDelta{{Index: 1, Arguments: `{}`}}, Finish: outputproc.Finish{Reason: outputproc.FinishToolCalls},
			Usage: outputproc.Usage{PromptTokens: 12, CompletionTokens: 30, CachedTokens: 4}},
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

type event struct {
	Type     string          `json:"type"`
	Seq      int             `json:"sequence_number"`
	Response json.RawMessage `json:"response"`
}

// parseEvents checks the SSE framing (event: line matches data type) and
// returns the events.
func parseEvents(t *testing.T, b []byte) []event {
	t.Helper()
	var evs []event
	for _, block := range strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n") {
		lines := strings.Split(block, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "event: ") || !strings.HasPrefix(lines[1], "data: ") {
			t.Fatalf("bad SSE block %q", block)
		}
		var e event
		if err := json.Unmarshal([]byte(lines[1][6:]), &e); err != nil {
			t.Fatalf("event data %q: %v", lines[1], err)
		}
		if e.Type != lines[0][7:] {
			t.Fatalf("event line %q, data type %q", lines[0], e.Type)
		}
		evs = append(evs, e)
	}
	return evs
}

// TestStreamGolden pins the bytes of a whole Responses stream and checks
// its invariants: strictly increasing sequence numbers, valid JSON, and a
// completed response equal to the non-streamed body.
func TestStreamGolden(t *testing.T) {
	s := NewStream(testMeta())
	var b []byte
	u := outputproc.Usage{PromptTokens: 12, CompletionTokens: 30, CachedTokens: 4}
	for _, d := range script() {
		b = s.AppendDelta(b, &d)
	}
	b = s.AppendEnd(b, &u)
	golden(t, "stream.golden", b)
	evs := parseEvents(t, b)
	for i, e := range evs {
		if e.Seq != i {
			t.Fatalf("event %d has sequence_number %d", i, e.Seq)
		}
	}
	last := evs[len(evs)-1]
	if last.Type != "response.completed" {
		t.Fatalf("last event %s", last.Type)
	}

	var acc outputproc.Accumulator
	for _, d := range script() {
		acc.Add(&d)
	}
	body := NewStream(testMeta()).Body([]*outputproc.Accumulator{&acc}, &u)
	golden(t, "body.golden", body)
	if !bytes.Equal(body, s.Final()) {
		t.Errorf("non-streamed body and the completed event differ:\n%s\n%s", body, s.Final())
	}
	if !bytes.Equal(compact(last.Response), body) {
		t.Errorf("response.completed carries\n%s\nnot\n%s", last.Response, body)
	}
}

// TestStreamEnds covers the other endings: max_output_tokens (incomplete)
// and a failure mid-stream (text flushed, then response.failed).
func TestStreamEnds(t *testing.T) {
	u := outputproc.Usage{PromptTokens: 3, CompletionTokens: 5}
	tests := []struct {
		name   string
		deltas []outputproc.Delta
		fail   bool
		last   string
		status string
	}{
		{"length", []outputproc.Delta{{First: true, Content: "abc"}, {Content: "de", Finish: outputproc.Finish{Reason: outputproc.FinishLength}}}, false, "response.incomplete", "incomplete"},
		{"failed", []outputproc.Delta{{First: true, Content: "abc"}}, true, "response.failed", "failed"},
		{"empty", []outputproc.Delta{{First: true, Finish: outputproc.Finish{Reason: outputproc.FinishStop}}}, false, "response.completed", "completed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStream(testMeta())
			var b []byte
			for _, d := range tc.deltas {
				b = s.AppendDelta(b, &d)
			}
			if tc.fail {
				b = s.AppendError(b, openai.NewError(500, "engine died"))
			} else {
				b = s.AppendEnd(b, &u)
			}
			evs := parseEvents(t, b)
			last := evs[len(evs)-1]
			var r struct {
				Status string `json:"status"`
				Output []struct {
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"output"`
			}
			if err := json.Unmarshal(last.Response, &r); err != nil {
				t.Fatal(err)
			}
			if last.Type != tc.last || r.Status != tc.status {
				t.Fatalf("ended with %s status %s", last.Type, r.Status)
			}
			if tc.name != "empty" && (len(r.Output) != 1 || r.Output[0].Content[0].Text != "abcde"[:len(r.Output[0].Content[0].Text)] || !strings.Contains(string(b), "response.output_text.done")) {
				t.Errorf("generated text not flushed: %s", b)
			}
		})
	}
}

// TestAppendDeltaAllocs: a text delta on an open item allocates nothing
// per token (beyond the amortized growth of the item's text).
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
