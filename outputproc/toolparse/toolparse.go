package toolparse

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// Tool is one function the request offers the model, from the request's
// tools[].function.
type Tool struct {
	// Name is the function name the model must use.
	Name string
	// Parameters is the function's JSON schema (may be empty). qwen3_coder
	// uses it to type parameter values.
	Parameters json.RawMessage
}

// ToolCallDelta is one piece of one tool call in a streamed Delta.
type ToolCallDelta struct {
	// Index is the call's position among this choice's calls (0, 1, …).
	Index int
	// ID, Type ("function") and Name are set only on a call's first delta.
	ID, Type, Name string
	// Arguments is the next fragment of the call's JSON arguments.
	Arguments string
}

// Delta is what a Parser releases after one Add or Finish.
type Delta struct {
	// Content is prose to send as the message content.
	Content string
	// ToolCalls are the call fragments, in order; consecutive fragments of
	// one call are merged. The slice is only valid until the parser's next
	// Add or Finish (its backing array is reused).
	ToolCalls []ToolCallDelta
}

// Empty reports whether d carries nothing.
func (d Delta) Empty() bool { return d.Content == "" && len(d.ToolCalls) == 0 }

// ToolCall is a complete call, as ParseAll returns it.
type ToolCall struct {
	// ID is the call's id, Type is "function", Name the function called.
	ID, Type, Name string
	// Arguments is the call's JSON arguments.
	Arguments string
}

// Parser extracts tool calls from one choice's streamed text.
type Parser interface {
	// Add takes the next text from the detokenizer (any size) and returns
	// what may be sent now.
	Add(text string) Delta
	// Finish is called once at the end of generation: it flushes held-back
	// content and the unstreamed remainder of any call.
	Finish() Delta
	// Called reports whether any tool call was emitted (the caller then sets
	// finish_reason "tool_calls").
	Called() bool
}

// families is every parser's machine, by name.
var families = map[string]*spec{
	"deepseek_v3": &deepseekSpec,
	"hermes":      &hermesSpec,
	"llama3_json": &llama3Spec,
	"mistral":     &mistralSpec,
	"pythonic":    &pythonicSpec,
	"qwen3_coder": &qwen3CoderSpec,
}

// names lists the parsers New knows, sorted.
var names = []string{"deepseek_v3", "hermes", "llama3_json", "mistral", "pythonic", "qwen3_coder"}

// Names returns the parser names New accepts, sorted.
func Names() []string { return append([]string(nil), names...) }

// New returns a fresh parser named name for a request offering tools. idGen
// makes call ids; nil means random "chatcmpl-tool-<32 hex>" ids.
func New(name string, tools []Tool, idGen func() string) (Parser, error) {
	s, ok := families[name]
	if !ok {
		return nil, fmt.Errorf("toolparse: unknown tool call parser %q (known: %s)", name, strings.Join(names, ", "))
	}
	if idGen == nil {
		idGen = randomID
	}
	return newMachine(s, base{idGen: idGen, tools: newToolSet(tools), afterCall: true}), nil
}

// AppendCalls folds streamed call fragments into complete calls: a fragment
// with a name opens (or names) call Index, and every fragment's Arguments are
// appended to that call's. calls grows as needed and is returned.
func AppendCalls(calls []ToolCall, deltas []ToolCallDelta) []ToolCall {
	for _, tc := range deltas {
		for len(calls) <= tc.Index {
			calls = append(calls, ToolCall{})
		}
		c := &calls[tc.Index]
		if tc.Name != "" {
			c.ID, c.Type, c.Name = tc.ID, tc.Type, tc.Name
		}
		c.Arguments += tc.Arguments
	}
	return calls
}

// ParseAll parses a whole answer at once: it is New + Add(text) + Finish, so
// it agrees byte for byte with the streamed result.
func ParseAll(name string, tools []Tool, text string) (content string, calls []ToolCall, err error) {
	p, err := New(name, tools, nil)
	if err != nil {
		return "", nil, err
	}
	var sb strings.Builder
	collect := func(d Delta) {
		sb.WriteString(d.Content)
		calls = AppendCalls(calls, d.ToolCalls)
	}
	collect(p.Add(text))
	collect(p.Finish())
	return sb.String(), calls, nil
}

// randomID returns an OpenAI-style tool call id.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "chatcmpl-tool-" + hex.EncodeToString(b[:])
}
