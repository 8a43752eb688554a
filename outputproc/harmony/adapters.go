package harmony

import (
	"github.com/sluice-llm/sluice/outputproc/reasoning"
	"github.com/sluice-llm/sluice/outputproc/toolparse"
)

// The frontend's output path chains a reasoning parser and a tool parser:
// reasoning.Add(text) gives (reasoning, content), then tools.Add(content)
// gives content and calls. Harmony carries both in one markup, so Pair
// splits one Parser into that chain: the reasoning half parses the raw
// text, and the tool half releases the calls the reasoning half found
// (its input is already clean content).

// ReasoningName and ToolName are vLLM's names for harmony's parsers.
const (
	ReasoningName = "openai_gptoss"
	ToolName      = "openai"
)

// Pair returns the two halves of one harmony Parser for the chain
// reasoning → tools. Either may be used alone: the reasoning half alone
// drops tool calls, the tool half alone (fed raw output) drops reasoning.
// Use both for gpt-oss with tools.
func Pair(tools []toolparse.Tool, idGen func() string) (reasoning.Parser, toolparse.Parser) {
	sh := &shared{p: New(tools, idGen)}
	return &reasoningHalf{sh}, &toolHalf{sh}
}

// shared is the one parser behind both halves and the calls the reasoning
// half has parsed but the tool half not yet released.
type shared struct {
	p         *Parser
	pending   []toolparse.ToolCallDelta
	ended     bool // a message other than analysis has started
	reasoning bool // the reasoning half is in use
}

func (s *shared) keep(d Delta) {
	for _, tc := range d.ToolCalls {
		if n := len(s.pending); n > 0 && s.pending[n-1].Index == tc.Index && tc.Name == "" {
			s.pending[n-1].Arguments += tc.Arguments
			continue
		}
		s.pending = append(s.pending, tc)
	}
	if d.Content != "" || len(d.ToolCalls) > 0 {
		s.ended = true
	}
}

type reasoningHalf struct{ sh *shared }

func (r *reasoningHalf) Add(text string) (string, string) {
	r.sh.reasoning = true
	d := r.sh.p.Add(text)
	r.sh.keep(d)
	return d.Reasoning, d.Content
}

func (r *reasoningHalf) Finish() (string, string) {
	r.sh.reasoning = true
	d := r.sh.p.Finish()
	r.sh.keep(d)
	return d.Reasoning, d.Content
}

// Ended reports whether a message other than reasoning has started.
func (r *reasoningHalf) Ended() bool { return r.sh.ended }

type toolHalf struct{ sh *shared }

// Add releases the calls parsed so far. Behind the reasoning half, text is
// already content and passes through; alone, text is raw output and is
// parsed here (reasoning is dropped).
func (t *toolHalf) Add(text string) toolparse.Delta {
	if t.sh.reasoning {
		return t.release(text)
	}
	d := t.sh.p.Add(text)
	t.sh.keep(d)
	return t.release(d.Content)
}

func (t *toolHalf) Finish() toolparse.Delta {
	if t.sh.reasoning {
		return t.release("")
	}
	d := t.sh.p.Finish()
	t.sh.keep(d)
	return t.release(d.Content)
}

func (t *toolHalf) release(content string) toolparse.Delta {
	d := toolparse.Delta{Content: content, ToolCalls: t.sh.pending}
	t.sh.pending = t.sh.pending[:0]
	return d
}

// Called reports whether a tool call was emitted.
func (t *toolHalf) Called() bool { return t.sh.p.Called() }
