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
	st State
	// What typed reads for every emitted delta, next to the State's end
	// (Options is not kept: its Text part is the State's).
	index       int
	prompt      int
	namedSent   bool
	namedChoice bool
	reasoning   ReasoningParser
	tools       toolparse.Parser
	echo        string
	namedTool   string
	toolID      func() string
	calls       []ToolCallDelta // reused for Delta.ToolCalls
	delta       Delta           // Process's delta (ProcessInto's caller brings its own)
}

// Init sets p up for one completion decoded with tok, in place (so that a
// caller can keep the Processor inside its own per-stream struct).
func (p *Processor) Init(tok tokenizer.Tokenizer, o Options) {
	p.st.Init(tok, o.Text)
	p.index, p.prompt = o.Index, len(o.Text.PromptIDs)
	p.namedSent, p.namedChoice = false, o.NamedChoice
	p.reasoning, p.tools = o.Reasoning, o.Tools
	p.echo, p.namedTool, p.toolID = o.Echo, o.NamedTool, o.ToolID
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
	ok, abort := p.ProcessInto(out, hold, &p.delta)
	if !ok {
		return nil, abort
	}
	return &p.delta, abort
}

// ProcessInto is Process writing the delta into d and reporting whether
// there is one: a caller serving many streams keeps d on its stack, which
// stays in the CPU's caches while a thousand streams' Processors do not.
func (p *Processor) ProcessInto(out *ipc.Output, hold bool, d *Delta) (ok, abort bool) {
	var td TextDelta
	ok, abort = p.st.ProcessInto(out, hold, &td)
	if ok {
		p.typed(&td, d)
	}
	return ok, abort
}

// Fail ends the completion with an error (engine down, internal failure):
// the returned delta carries everything generated so far and FinishError
// with msg. It returns nil when the completion had already finished.
func (p *Processor) Fail(msg string) *Delta {
	td := p.st.Fail(msg)
	if td == nil {
		return nil
	}
	p.typed(td, &p.delta)
	return &p.delta
}

// Pending returns a delta of everything not yet emitted, without ending
// the completion (nil when there is nothing), for a caller that must flush
// before it ends the request itself.
func (p *Processor) Pending() *Delta {
	td := p.st.Pending()
	if td == nil {
		return nil
	}
	p.typed(td, &p.delta)
	return &p.delta
}

// typed runs the parsers over a text delta and fills d.
func (p *Processor) typed(td *TextDelta, d *Delta) {
	final := td.Finished
	text := td.Text
	if td.First && p.echo != "" {
		text = p.echo + text
	}
	*d = Delta{
		Index:    p.index,
		First:    td.First,
		TokenIDs: td.TokenIDs,
		Logprobs: td.Logprobs,
		Usage:    Usage{PromptTokens: p.prompt, CompletionTokens: td.NumTokens, CachedTokens: td.CachedTokens},
	}
	d.Content, d.Reasoning, d.ToolCalls = p.split(text, final)
	if !final {
		return
	}
	d.Finish = Finish{Reason: finishFromEngine(td.FinishReason), Stop: td.StopReason, Error: td.Error}
	if d.Finish.Reason == FinishStop && p.tools != nil && p.tools.Called() && !p.namedChoice {
		d.Finish.Reason = FinishToolCalls
	}
}

// split runs the reasoning and tool parsers over text.
func (p *Processor) split(text string, final bool) (content, reasoning string, calls []ToolCallDelta) {
	content = text
	if p.reasoning != nil {
		reasoning, content = p.reasoning.Add(content)
		if final {
			r2, c2 := p.reasoning.Finish()
			reasoning += r2
			content += c2
		}
	}
	switch {
	case p.tools != nil:
		p.calls = p.calls[:0]
		td := p.tools.Add(content)
		content = td.Content
		p.appendCalls(td.ToolCalls)
		if final {
			td = p.tools.Finish()
			content += td.Content
			p.appendCalls(td.ToolCalls)
		}
	case p.namedTool != "":
		p.calls = p.calls[:0]
		if content != "" || (final && !p.namedSent) {
			c := ToolCallDelta{Index: 0, Arguments: content}
			if !p.namedSent {
				c.Name = p.namedTool
				if p.toolID != nil {
					c.ID = p.toolID()
				}
				p.namedSent = true
			}
			p.calls = append(p.calls, c)
		}
		content = ""
	default:
		return content, reasoning, nil // p.calls is not touched: one cache line less
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
