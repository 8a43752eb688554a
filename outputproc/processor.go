package outputproc

import (
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/outputproc/toolparse"
	"github.com/sluice-llm/sluice/text/tokenizer"
)

// ReasoningParser splits streamed text into reasoning and content
// (reasoning.Parser satisfies it).
type ReasoningParser interface {
	Add(text string) (reasoning, content string)
	Finish() (reasoning, content string)
}

// Options configure the Processor of one completion. Text configures the
// detokenizer, stop strings and stream interval; the rest are the parsers
// that split the text (all optional: a plain completion has none).
type Options struct {
	// Index is the completion's index in its request (Delta.Index).
	Index int
	// Text configures detokenization, stop strings and the stream interval.
	Text Params
	// Echo is text put before the first delta's text (echo, or a chat's
	// continued final assistant message).
	Echo string
	// Reasoning splits reasoning from content; nil for none.
	Reasoning ReasoningParser
	// Tools reads tool calls out of the content; nil for none.
	Tools toolparse.Parser
	// NamedTool, when Tools is nil, makes all content the arguments of one
	// call to this function (a named tool_choice constrained to bare
	// arguments); ToolID gives the call's id.
	NamedTool string
	ToolID    func() string
	// NamedChoice: the request named its tool; a stop after tool calls
	// stays "stop" (OpenAI's rule for a named tool_choice) instead of
	// FinishToolCalls.
	NamedChoice bool
}

// Processor is the output processor of one completion: for each engine
// output it runs detokenizer → stop strings → stream interval (State),
// then the reasoning parser → tool parser over the text each emitted delta
// carries, and yields one typed Delta. The parsers run on coalesced text,
// never assuming one token per delta.
//
// A Processor is pure (no clock, no I/O) and not safe for concurrent use:
// exactly one goroutine owns it at a time.
type Processor struct {
	st        State
	o         Options
	namedSent bool
	prompt    int
	calls     []ToolCallDelta // reused for Delta.ToolCalls
	delta     Delta
}

// Init sets p up for one completion decoded with tok, in place (so that a
// caller can keep the Processor inside its own per-stream struct).
func (p *Processor) Init(tok tokenizer.Tokenizer, o Options) {
	p.st.Init(tok, o.Text)
	p.o = o
	p.namedSent = false
	p.prompt = len(o.Text.PromptIDs)
	p.calls = p.calls[:0]
}

// NewProcessor returns the Processor of one completion.
func NewProcessor(tok tokenizer.Tokenizer, o Options) *Processor {
	p := new(Processor)
	p.Init(tok, o)
	return p
}

// Finished reports whether the completion has ended.
func (p *Processor) Finished() bool { return p.st.Finished() }

// NumTokens is the number of output tokens so far.
func (p *Processor) NumTokens() int { return p.st.NumTokens() }

// PendingBytes estimates the memory held by output not yet emitted (see
// State.PendingBytes).
func (p *Processor) PendingBytes() int { return p.st.PendingBytes() }

// Process applies one engine output. It returns the delta to emit now, or
// nil when nothing is to be emitted yet (stream interval, or hold: set by a
// caller whose client has not taken the previous delta, so that pending
// tokens merge into the next one). abort reports that a stop string ended
// the completion while the engine still runs it: the caller must send
// ABORT. Outputs after the finish are ignored.
func (p *Processor) Process(out *ipc.Output, hold bool) (d *Delta, abort bool) {
	td, abort := p.st.Process(out, hold)
	if td == nil {
		return nil, abort
	}
	return p.typed(td), abort
}

// Fail ends the completion with an error (engine down, internal failure):
// the returned delta carries everything generated so far and FinishError
// with msg. It returns nil when the completion had already finished.
func (p *Processor) Fail(msg string) *Delta {
	td := p.st.Fail(msg)
	if td == nil {
		return nil
	}
	return p.typed(td)
}

// Pending returns a delta of everything not yet emitted, without ending
// the completion (nil when there is nothing), for a caller that must flush
// before it ends the request itself.
func (p *Processor) Pending() *Delta {
	td := p.st.Pending()
	if td == nil {
		return nil
	}
	return p.typed(td)
}

// typed runs the parsers over a text delta and fills p.delta.
func (p *Processor) typed(td *TextDelta) *Delta {
	final := td.Finished
	text := td.Text
	if td.First && p.o.Echo != "" {
		text = p.o.Echo + text
	}
	d := &p.delta
	*d = Delta{
		Index:    p.o.Index,
		First:    td.First,
		TokenIDs: td.TokenIDs,
		Logprobs: td.Logprobs,
		Usage:    Usage{PromptTokens: p.prompt, CompletionTokens: td.NumTokens, CachedTokens: td.CachedTokens},
	}
	d.Content, d.Reasoning, d.ToolCalls = p.split(text, final)
	if !final {
		return d
	}
	d.Finish = Finish{Reason: finishFromEngine(td.FinishReason), Stop: td.StopReason, Error: td.Error}
	if d.Finish.Reason == FinishStop && p.o.Tools != nil && p.o.Tools.Called() && !p.o.NamedChoice {
		d.Finish.Reason = FinishToolCalls
	}
	return d
}

// split runs the reasoning and tool parsers over text.
func (p *Processor) split(text string, final bool) (content, reasoning string, calls []ToolCallDelta) {
	content = text
	if p.o.Reasoning != nil {
		reasoning, content = p.o.Reasoning.Add(content)
		if final {
			r2, c2 := p.o.Reasoning.Finish()
			reasoning += r2
			content += c2
		}
	}
	p.calls = p.calls[:0]
	switch {
	case p.o.Tools != nil:
		td := p.o.Tools.Add(content)
		content = td.Content
		p.appendCalls(td.ToolCalls)
		if final {
			td = p.o.Tools.Finish()
			content += td.Content
			p.appendCalls(td.ToolCalls)
		}
	case p.o.NamedTool != "":
		if content != "" || (final && !p.namedSent) {
			c := ToolCallDelta{Index: 0, Arguments: content}
			if !p.namedSent {
				c.Name = p.o.NamedTool
				if p.o.ToolID != nil {
					c.ID = p.o.ToolID()
				}
				p.namedSent = true
			}
			p.calls = append(p.calls, c)
		}
		content = ""
	}
	if len(p.calls) == 0 {
		return content, reasoning, nil
	}
	return content, reasoning, p.calls
}

func (p *Processor) appendCalls(src []toolparse.ToolCallDelta) {
	for _, t := range src {
		p.calls = append(p.calls, ToolCallDelta{Index: t.Index, ID: t.ID, Name: t.Name, Arguments: t.Arguments})
	}
}
