package outputproc

import (
	"github.com/sluice-llm/sluice/ipc"
)

// FinishReason says why a completion ended, in API-neutral terms; each
// renderer spells it for its API (OpenAI: String; Anthropic would map
// FinishToolCalls to "tool_use", FinishLength to "max_tokens").
type FinishReason uint8

// Finish reasons.
const (
	FinishNone      FinishReason = iota // still running
	FinishStop                          // EOS, a stop token or a stop string
	FinishLength                        // max_tokens or the context length
	FinishToolCalls                     // stopped after emitting tool calls
	FinishAbort                         // aborted by the frontend
	FinishError                         // failed; see Finish.Error
)

// String is the OpenAI spelling ("stop", "length", "tool_calls", "abort",
// "error"; "" while running).
func (f FinishReason) String() string {
	switch f {
	case FinishStop:
		return "stop"
	case FinishLength:
		return "length"
	case FinishToolCalls:
		return "tool_calls"
	case FinishAbort:
		return "abort"
	case FinishError:
		return "error"
	}
	return ""
}

// finishFromEngine maps the engine's finish reason (FinishNone and unknown
// values read as a stop, as the engine only ends requests it means to).
func finishFromEngine(f ipc.FinishReason) FinishReason {
	switch f {
	case ipc.FinishLength:
		return FinishLength
	case ipc.FinishAbort:
		return FinishAbort
	case ipc.FinishError:
		return FinishError
	}
	return FinishStop
}

// Finish is how a completion ended; Reason is FinishNone on every delta
// but the last.
type Finish struct {
	Reason FinishReason
	// Stop names the stop token id or stop string that ended it, when one
	// did (Reason FinishStop or FinishToolCalls).
	Stop StopReason
	// Error is the failure's message when Reason is FinishError.
	Error string
}

// Usage is the token accounting of one completion (in a Delta: so far),
// or of a whole request when a caller sums its completions.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	// CachedTokens are prompt tokens the engine found in its prefix cache.
	CachedTokens int
}

// ToolCallDelta is one fragment of a streamed tool call. A call's first
// fragment carries its ID and Name; later ones only more Arguments (a
// fragment of the call's JSON arguments text).
type ToolCallDelta struct {
	// Index is the call's position among this completion's calls (0, 1, …).
	Index     int
	ID        string
	Name      string
	Arguments string
}

// Delta is what the output processor yields for one completion: all that
// is new since its previous delta, split by kind, the same for every API
// surface. A renderer turns deltas into its API's bytes.
//
// Strings are immutable; the slices (TokenIDs, Logprobs, ToolCalls) are
// valid only until the next call on the Processor that returned it.
type Delta struct {
	// Index is the completion's index in its request (the choice index).
	Index int
	// First marks the completion's first delta.
	First bool
	// Content is answer text; Reasoning is reasoning ("thinking") text.
	Content   string
	Reasoning string
	// ToolCalls are tool-call fragments, in order.
	ToolCalls []ToolCallDelta
	// TokenIDs are the tokens behind this delta (in order), and Logprobs
	// their logprobs, one per token, when the request asked for them.
	TokenIDs []int32
	Logprobs []ipc.TokenLogprobs
	// Finish is set (Reason != FinishNone) on the completion's last delta.
	Finish Finish
	// Usage is this completion's usage so far.
	Usage Usage
}

// Finished reports whether d is its completion's last delta.
func (d *Delta) Finished() bool { return d.Finish.Reason != FinishNone }

// Failed reports whether d ended its completion with an error.
func (d *Delta) Failed() bool { return d.Finish.Reason == FinishError }
