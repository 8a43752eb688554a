package harmony

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/outputproc/toolparse"
)

// chain feeds pieces through the halves the way the frontend's chatContent
// does (reasoning, then tools on the content; Finish of both at the end)
// and accumulates the result. Either half may be nil.
func chain(t *testing.T, useReasoning, useTools bool, pieces []string) result {
	t.Helper()
	n := 0
	rp, tp := Pair(testTools, func() string { n++; return fmt.Sprintf("call_%d", n) })
	var r result
	var rs, cs strings.Builder
	step := func(text string, final bool) {
		content := text
		if useReasoning {
			var re string
			re, content = rp.Add(content)
			rs.WriteString(re)
			if final {
				r2, c2 := rp.Finish()
				rs.WriteString(r2)
				content += c2
			}
		}
		if useTools {
			deltas := []toolparse.Delta{tp.Add(content)}
			if final {
				deltas = append(deltas, tp.Finish())
			}
			content = ""
			for _, d := range deltas {
				content += d.Content
				for _, tc := range d.ToolCalls {
					if tc.Index == len(r.Calls) {
						if tc.Name == "" || tc.ID == "" {
							t.Fatalf("first delta of call %d: %+v", tc.Index, tc)
						}
						r.Calls = append(r.Calls, goldenCall{Name: tc.Name})
					} else if tc.Name != "" {
						t.Fatalf("repeated header for call %d: %+v", tc.Index, tc)
					}
					r.Calls[tc.Index].Arguments += tc.Arguments
				}
			}
		}
		cs.WriteString(content)
	}
	for i, s := range pieces {
		step(s, i == len(pieces)-1)
	}
	r.Reasoning, r.Content = rs.String(), cs.String()
	return r
}

// TestPair checks that the halves chained as the frontend chains parsers
// give exactly the combined parser's result, at every chunk size, and that
// each half alone keeps its own part.
func TestPair(t *testing.T) {
	text := "<|channel|>analysis<|message|>Need two tools.<|end|><|start|>assistant<|channel|>final<|message|>Checking.<|end|>" +
		"<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Oslo\"}<|call|>" +
		"<|start|>assistant<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}<|call|>"
	want := feed(t, []string{text})
	if len(want.Calls) != 2 || want.Reasoning == "" || want.Content == "" {
		t.Fatalf("bad fixture result %+v", want)
	}
	for size := 1; size <= len(text); size++ {
		if got := chain(t, true, true, chunks(text, size)); !reflect.DeepEqual(got, want) {
			t.Fatalf("chunk %d: got %+v, want %+v", size, got, want)
		}
	}
	toolsOnly := chain(t, false, true, chunks(text, 5))
	if toolsOnly.Reasoning != "" || toolsOnly.Content != want.Content || !reflect.DeepEqual(toolsOnly.Calls, want.Calls) {
		t.Errorf("tool half alone: %+v", toolsOnly)
	}
	reasoningOnly := chain(t, true, false, chunks(text, 5))
	if reasoningOnly.Reasoning != want.Reasoning || reasoningOnly.Content != want.Content || reasoningOnly.Calls != nil {
		t.Errorf("reasoning half alone: %+v", reasoningOnly)
	}
	rp, tp := Pair(nil, nil)
	if rp.Ended() || tp.Called() {
		t.Error("fresh pair reports ended or called")
	}
	rp.Add("<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>y")
	if !rp.Ended() {
		t.Error("Ended false after the final channel started")
	}
}
