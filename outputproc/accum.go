package outputproc

import (
	"strings"

	"github.com/sluice-llm/sluice/ipc"
)

// Accumulator folds one completion's deltas into its whole output, for
// non-streamed responses: every renderer's response body is built from
// these, so no API surface accumulates on its own.
type Accumulator struct {
	// Index is the completion's index in its request.
	Index int
	// Content and Reasoning are the completion's whole texts.
	Content   strings.Builder
	Reasoning strings.Builder
	// ToolCalls are whole calls (fragments merged by index, in order of
	// first appearance).
	ToolCalls []ToolCallDelta
	// TokenIDs and Logprobs are every output token and its logprobs (when
	// requested).
	TokenIDs []int32
	Logprobs []ipc.TokenLogprobs
	// Finish is how the completion ended (Reason FinishNone until then).
	Finish Finish
	// Usage is the completion's last reported usage.
	Usage Usage
}

// Add folds d in. It copies what it keeps, so d's slices may be reused.
func (a *Accumulator) Add(d *Delta) {
	a.Index = d.Index
	a.Content.WriteString(d.Content)
	a.Reasoning.WriteString(d.Reasoning)
	a.ToolCalls = mergeToolCalls(a.ToolCalls, d.ToolCalls)
	a.TokenIDs = append(a.TokenIDs, d.TokenIDs...)
	a.Logprobs = append(a.Logprobs, d.Logprobs...)
	a.Usage = d.Usage
	if d.Finished() {
		a.Finish = d.Finish
	}
}

// mergeToolCalls folds streamed fragments into whole calls.
func mergeToolCalls(dst, src []ToolCallDelta) []ToolCallDelta {
	for _, t := range src {
		found := false
		for i := range dst {
			if dst[i].Index == t.Index {
				dst[i].Arguments += t.Arguments
				if t.ID != "" {
					dst[i].ID = t.ID
				}
				if t.Name != "" {
					dst[i].Name = t.Name
				}
				found = true
				break
			}
		}
		if !found {
			dst = append(dst, t)
		}
	}
	return dst
}
