// Package harmony parses gpt-oss's output, written in OpenAI's harmony
// format, progressively: the analysis channel streams as reasoning, the
// final channel as content, and commentary messages addressed to
// functions.NAME as tool calls whose JSON arguments stream as fragments.
// It serves vLLM's --reasoning-parser openai_gptoss and --tool-call-parser
// openai, which for harmony are one parser: the same markup carries both.
//
// The output after the prompt's "<|start|>assistant" is a sequence of
// messages:
//
//	[<|start|>ROLE] [ to=RECIPIENT]<|channel|>CHANNEL[ to=RECIPIENT][ [<|constrain|>]TYPE]<|message|>BODY END
//
// where END is <|end|>, <|call|> (after a tool call) or <|return|> (after
// the final answer). The parser needs that markup: the text it is fed must
// come from a detokenizer that keeps special tokens
// (skip_special_tokens=false). The markup tokens are recognised as the
// exact strings "<|start|>", "<|channel|>", "<|message|>", "<|constrain|>",
// "<|end|>", "<|call|>", "<|return|>" and "<|endoftext|>"; none of them is
// ever part of what the parser returns.
//
// Rules (each depends only on the text, never on where deltas were cut, so
// streaming equals ParseAll):
//   - A header runs from the start of the output, or from the end of the
//     previous message, to <|message|>. Its channel is the word after its
//     last <|channel|>; its recipient the word after its first "to=".
//   - The body goes to: a tool call for recipient functions.NAME (when the
//     request offers tools, NAME must be one of them); reasoning for the
//     analysis channel and for any other recipient (built-in tools such as
//     "python" or "browser.search", unknown functions); content for the
//     final channel, for commentary without a recipient (a preamble) and
//     for a missing or unknown channel.
//   - A body ends at <|end|>, <|call|>, <|return|>, <|endoftext|> or
//     <|start|>; a <|channel|> in a body also starts the next header (the
//     model left out "<|end|><|start|>assistant"). <|message|> and
//     <|constrain|> inside a body are dropped.
//   - A tool call's first delta carries its index, id, type "function" and
//     name, sent when its header is complete; its arguments follow verbatim,
//     fragment by fragment (invalid JSON included: a committed call is never
//     retracted). A call whose body is empty gets arguments "{}".
//   - Only a tail that could still become a markup token ("<|ca") is held
//     back. A header with an END token before <|message|> is dropped. Output
//     without markup (a model ignoring the format) is content: a header that
//     reaches 256 bytes without <|message|>, or that the output ends inside,
//     is released as content (minus any markup tokens) — except that an
//     unfinished header holding markup at the very end is dropped.
//
// A Parser is not safe for concurrent use; one belongs to one choice of one
// request.
package harmony

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"strings"

	"github.com/sluice-llm/sluice/outputproc/toolparse"
)

// The harmony markup tokens the parser recognises.
const (
	tagStart     = "<|start|>"
	tagChannel   = "<|channel|>"
	tagMessage   = "<|message|>"
	tagConstrain = "<|constrain|>"
	tagEnd       = "<|end|>"
	tagCall      = "<|call|>"
	tagReturn    = "<|return|>"
	tagEOT       = "<|endoftext|>"
)

// tags lists every markup token.
var tags = [...]string{tagStart, tagChannel, tagMessage, tagConstrain, tagEnd, tagCall, tagReturn, tagEOT}

// headerLimit is the length a header may reach without <|message|> before
// the text is taken to be plain output.
const headerLimit = 256

// Delta is what the parser releases after one Add or Finish.
type Delta struct {
	// Reasoning is analysis-channel text.
	Reasoning string
	// Content is answer text.
	Content string
	// ToolCalls are call fragments in order (see toolparse.ToolCallDelta).
	// The slice is valid until the parser's next Add or Finish.
	ToolCalls []toolparse.ToolCallDelta
}

// Empty reports whether d carries nothing.
func (d Delta) Empty() bool { return d.Reasoning == "" && d.Content == "" && len(d.ToolCalls) == 0 }

// mode is where a body's text goes.
type mode uint8

const (
	toContent mode = iota
	toReasoning
	toCall
)

// Parser parses one choice's harmony output.
type Parser struct {
	tools map[string]bool // nil: any function name is a call
	idGen func() string

	buf []byte // text not yet decided (at most a partial markup token)
	// last is the latest Add's text, which starts at buf[lastOff]: output
	// is sliced from it, so a delta usually costs no copy.
	last    string
	lastOff int
	inBody  bool
	mode    mode
	// header holds the current header's bytes, markup included.
	header       []byte
	headerHasTag bool

	calls    int  // calls started so far
	argsSent bool // the current call has sent argument bytes

	reasoning, content string
	deltas             []toolparse.ToolCallDelta
}

// New returns a parser for a request offering tools (none: any function
// name counts). idGen makes call ids; nil means random
// "chatcmpl-tool-<32 hex>" ids.
func New(tools []toolparse.Tool, idGen func() string) *Parser {
	if idGen == nil {
		idGen = randomID
	}
	p := &Parser{idGen: idGen}
	if len(tools) > 0 {
		p.tools = make(map[string]bool, len(tools))
		for _, t := range tools {
			p.tools[t.Name] = true
		}
	}
	return p
}

// Called reports whether a tool call was emitted (finish_reason
// "tool_calls").
func (p *Parser) Called() bool { return p.calls > 0 }

// Add takes the next text (any size) and returns what may be sent now.
func (p *Parser) Add(text string) Delta {
	p.last, p.lastOff = text, len(p.buf)
	p.buf = append(p.buf, text...)
	p.run(false)
	return p.take()
}

// Finish is called once at the end of generation: it flushes what was held
// back and closes an open call.
func (p *Parser) Finish() Delta {
	p.last, p.lastOff = "", len(p.buf)+1 // buf no longer ends with last
	p.run(true)
	if p.inBody {
		p.endBody()
	} else if len(p.header) > 0 && !p.headerHasTag {
		appendStr(&p.content, string(p.header)) // plain output that never became a header
		p.header = p.header[:0]
	}
	return p.take()
}

// ParseAll parses a whole output at once (New + Add + Finish), returning
// reasoning, content and the complete calls.
func ParseAll(tools []toolparse.Tool, idGen func() string, text string) (reasoning, content string, calls []toolparse.ToolCall) {
	p := New(tools, idGen)
	var rs, cs strings.Builder
	collect := func(d Delta) {
		rs.WriteString(d.Reasoning)
		cs.WriteString(d.Content)
		calls = toolparse.AppendCalls(calls, d.ToolCalls)
	}
	collect(p.Add(text))
	collect(p.Finish())
	return rs.String(), cs.String(), calls
}

func (p *Parser) take() Delta {
	d := Delta{Reasoning: p.reasoning, Content: p.content, ToolCalls: p.deltas}
	p.reasoning, p.content = "", ""
	p.deltas = p.deltas[:0]
	return d
}

// str returns buf[a:e] as a string, sliced from the latest Add's text when
// it lies there.
func (p *Parser) str(a, e int) string {
	if a >= p.lastOff && e-p.lastOff <= len(p.last) {
		return p.last[a-p.lastOff : e-p.lastOff]
	}
	return string(p.buf[a:e])
}

// appendStr appends s to *dst, copying only when both are non-empty.
func appendStr(dst *string, s string) {
	if *dst == "" {
		*dst = s
	} else {
		*dst += s
	}
}

// run consumes p.buf item by item: runs of text and whole markup tokens.
// Unless final, a tail that could still become a token is kept.
func (p *Parser) run(final bool) {
	i := 0
	for i < len(p.buf) {
		j := bytes.Index(p.buf[i:], []byte("<|"))
		if j < 0 {
			end := len(p.buf)
			if !final && p.buf[end-1] == '<' {
				end-- // may become "<|"
			}
			p.text(i, end)
			i = end
			break
		}
		if j > 0 {
			p.text(i, i+j)
			i += j
		}
		tag, partial := matchTag(p.buf[i:])
		switch {
		case tag != "":
			p.tag(tag)
			i += len(tag)
		case partial && !final:
			p.buf = append(p.buf[:0], p.buf[i:]...)
			return
		default:
			p.text(i, i+1) // a "<" that starts no token
			i++
		}
	}
	p.buf = append(p.buf[:0], p.buf[i:]...)
}

// matchTag reports the markup token b starts with, or whether b is a proper
// prefix of one.
func matchTag(b []byte) (tag string, partial bool) {
	for _, t := range tags {
		if len(b) >= len(t) {
			if string(b[:len(t)]) == t {
				return t, false
			}
		} else if string(b) == t[:len(b)] {
			partial = true
		}
	}
	return "", partial
}

// text handles the run of text buf[a:e].
func (p *Parser) text(a, e int) {
	if a == e {
		return
	}
	if p.inBody {
		p.emit(p.str(a, e))
		return
	}
	p.header = append(p.header, p.buf[a:e]...)
	p.checkOverflow()
}

// checkOverflow turns a header that grew too long into plain content.
func (p *Parser) checkOverflow() {
	if len(p.header) < headerLimit {
		return
	}
	s := string(p.header)
	for _, t := range tags {
		s = strings.ReplaceAll(s, t, "")
	}
	p.header = p.header[:0]
	p.headerHasTag = false
	p.inBody, p.mode = true, toContent
	appendStr(&p.content, s)
}

// tag handles one markup token.
func (p *Parser) tag(t string) {
	if p.inBody {
		switch t {
		case tagMessage, tagConstrain:
			return // stray markup inside a body
		case tagChannel:
			p.endBody()
			p.header = append(p.header, t...)
			p.headerHasTag = true
			return
		}
		p.endBody()
		return
	}
	switch t {
	case tagMessage:
		p.startBody()
	case tagEnd, tagCall, tagReturn, tagEOT:
		p.header, p.headerHasTag = p.header[:0], false // a header with no body
	case tagStart:
		p.header, p.headerHasTag = p.header[:0], false
	default:
		p.header = append(p.header, t...)
		p.headerHasTag = true
		p.checkOverflow()
	}
}

// startBody parses the finished header and opens the body.
func (p *Parser) startBody() {
	channel, recipient := parseHeader(string(p.header))
	p.header, p.headerHasTag = p.header[:0], false
	p.inBody = true
	switch {
	case recipient != "":
		name, ok := strings.CutPrefix(recipient, "functions.")
		if ok && name != "" && (p.tools == nil || p.tools[name]) {
			p.mode = toCall
			p.argsSent = false
			p.deltas = append(p.deltas, toolparse.ToolCallDelta{Index: p.calls, ID: p.idGen(), Type: "function", Name: name})
			p.calls++
			return
		}
		p.mode = toReasoning
	case channel == "analysis":
		p.mode = toReasoning
	default: // final, commentary preamble, missing or unknown channel
		p.mode = toContent
	}
}

// endBody closes the current message.
func (p *Parser) endBody() {
	if p.mode == toCall && !p.argsSent {
		p.args("{}")
	}
	p.inBody, p.mode = false, toContent
}

// emit sends body text where the message's header says.
func (p *Parser) emit(s string) {
	switch p.mode {
	case toReasoning:
		appendStr(&p.reasoning, s)
	case toContent:
		appendStr(&p.content, s)
	case toCall:
		p.argsSent = true
		p.args(s)
	}
}

// args appends an argument fragment to the current call, merging it with
// the previous fragment of the same call.
func (p *Parser) args(s string) {
	if n := len(p.deltas); n > 0 && p.deltas[n-1].Index == p.calls-1 {
		appendStr(&p.deltas[n-1].Arguments, s)
		return
	}
	p.deltas = append(p.deltas, toolparse.ToolCallDelta{Index: p.calls - 1, Arguments: s})
}

// parseHeader returns the word after the header's last <|channel|> and the
// word after its first "to=". Words end at whitespace or markup.
func parseHeader(h string) (channel, recipient string) {
	rest := h
	for {
		k := strings.Index(rest, tagChannel)
		if k < 0 {
			break
		}
		rest = rest[k+len(tagChannel):]
		channel = word(rest)
	}
	if k := strings.Index(h, "to="); k >= 0 {
		recipient = word(h[k+len("to="):])
	}
	return channel, recipient
}

// word returns s up to the first whitespace or "<|".
func word(s string) string {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			return s[:i]
		case '<':
			if i+1 < len(s) && s[i+1] == '|' {
				return s[:i]
			}
		}
	}
	return s
}

// randomID returns an OpenAI-style tool call id.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "chatcmpl-tool-" + hex.EncodeToString(b[:])
}
