// Package reasoning separates a model's reasoning ("thinking") from its
// answer in streamed output, for models that wrap reasoning in
// <think>…</think> (DeepSeek-R1 and its distills, Qwen3).
//
// A Parser is fed the detokenized text in deltas of any size and returns,
// for each, the reasoning and the content that may be sent now. Only a tail
// that could still be a tag ("</thi") is held back; tags split across deltas
// are recognised. The result depends only on the text, never on how it was
// split, and ParseAll is New + Add(text) + Finish.
//
// Rules:
//   - deepseek_r1: output is reasoning until </think>, whether or not the
//     model wrote the opening <think> (R1 templates put it in the prompt); a
//     leading <think> (after optional whitespace) is dropped.
//   - qwen3: reasoning only when the output opens with <think> (after
//     optional whitespace), or from the start when Options.ThinkingOpenedInPrompt
//     says the chat template already opened it; otherwise all output is
//     content. An unpaired <tool_call> inside reasoning ends it implicitly
//     (as in vLLM): the tag and what follows are content. With
//     enable_thinking=false there is no reasoning at all: the caller uses no
//     reasoning parser then.
//   - After </think>, leading whitespace of the content is dropped (the
//     "\n\n" models put after the tag); everything after that is content,
//     including any literal <think> or </think> (vLLM #48971).
//   - Reasoning cut off by the end of output (no </think>) stays reasoning;
//     Finish flushes any held-back partial tag into it.
//
// A Parser is not safe for concurrent use; one belongs to one choice of one
// request.
package reasoning

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/sluice-llm/sluice/outputproc/tagscan"
)

// Options configure a parser for one request.
type Options struct {
	// ThinkingOpenedInPrompt says the chat template ended the prompt with
	// <think>, so the output starts inside the reasoning.
	ThinkingOpenedInPrompt bool
}

// Parser splits one choice's streamed text into reasoning and content.
type Parser interface {
	// Add takes the next text (any size) and returns what may be sent now.
	Add(text string) (reasoning, content string)
	// Finish is called once at the end of generation and flushes what was
	// held back.
	Finish() (reasoning, content string)
	// Ended reports whether reasoning is over (or never started): from then
	// on all text is content, so a tool parser may take over.
	Ended() bool
}

var names = []string{"deepseek_r1", "qwen3"}

// Names returns the parser names New accepts, sorted.
func Names() []string { return append([]string(nil), names...) }

// New returns a fresh reasoning parser named name.
func New(name string, opts Options) (Parser, error) {
	switch name {
	case "deepseek_r1":
		return &thinkParser{st: stStart, implicitOpen: true}, nil
	case "qwen3":
		return &thinkParser{st: stStart, implicitOpen: opts.ThinkingOpenedInPrompt, toolCallEnds: true}, nil
	}
	return nil, fmt.Errorf("reasoning: unknown reasoning parser %q (known: %s)", name, strings.Join(names, ", "))
}

// ParseAll splits a whole answer at once (New + Add + Finish).
func ParseAll(name string, opts Options, text string) (reasoning, content string, err error) {
	p, err := New(name, opts)
	if err != nil {
		return "", "", err
	}
	r1, c1 := p.Add(text)
	r2, c2 := p.Finish()
	return r1 + r2, c1 + c2, nil
}

const (
	openTag     = "<think>"
	closeTag    = "</think>"
	toolCallTag = "<tool_call>"
)

// Parser states.
const (
	stStart   = iota // before the first non-space byte: is there a <think>?
	stReason         // inside reasoning
	stLead           // right after </think>: dropping whitespace
	stContent        // the answer
)

// thinkParser implements both parsers; they differ in whether reasoning
// starts without an opening tag and whether <tool_call> ends it.
type thinkParser struct {
	buf          []byte
	pos          int    // buf[:pos] is decided
	last         string // the latest Add's text, to slice output without copying
	lastOff      int
	st           uint8
	implicitOpen bool // reasoning starts even without <think>
	toolCallEnds bool // an unpaired <tool_call> ends reasoning
	reasoning    string
	content      string
}

func (p *thinkParser) Ended() bool { return p.st == stLead || p.st == stContent }

func (p *thinkParser) Add(text string) (string, string) {
	p.lastOff, p.last = len(p.buf), text
	p.buf = append(p.buf, text...)
	p.run(false)
	return p.take()
}

func (p *thinkParser) Finish() (string, string) {
	p.run(true)
	return p.take()
}

func (p *thinkParser) take() (string, string) {
	r, c := p.reasoning, p.content
	p.reasoning, p.content = "", ""
	return r, c
}

func (p *thinkParser) str(a, e int) string {
	if a >= p.lastOff {
		return p.last[a-p.lastOff : e-p.lastOff]
	}
	return string(p.buf[a:e])
}

func appendStr(dst *string, s string) {
	if *dst == "" {
		*dst = s
	} else {
		*dst += s
	}
}

func (p *thinkParser) emit(dst *string, a, e int) {
	if a < e {
		appendStr(dst, p.str(a, e))
	}
}

func (p *thinkParser) run(final bool) {
	for {
		switch p.st {
		case stStart:
			i := p.pos
			for i < len(p.buf) && tagscan.IsSpace(p.buf[i]) {
				i++
			}
			rest := p.buf[i:]
			switch {
			case len(rest) >= len(openTag) && string(rest[:len(openTag)]) == openTag:
				p.pos = i + len(openTag)
				p.st = stReason
			case !final && len(rest) < len(openTag) && string(rest) == openTag[:len(rest)]:
				return // maybe the start of <think>
			case p.implicitOpen:
				p.st = stReason
			default:
				p.st = stContent
			}
		case stReason:
			rest := p.buf[p.pos:]
			end, next := indexOf(rest, closeTag), 0
			if end >= 0 {
				next = end + len(closeTag)
			}
			if p.toolCallEnds {
				if j := indexOf(rest, toolCallTag); j >= 0 && (end < 0 || j < end) {
					end, next = j, j
				}
			}
			if end < 0 {
				stop := len(p.buf)
				if !final {
					stop -= tagscan.PartialSuffix(rest, closeTag, p.toolCallTag())
				}
				p.emit(&p.reasoning, p.pos, stop)
				p.pos = stop
				return
			}
			p.emit(&p.reasoning, p.pos, p.pos+end)
			if next > end {
				p.st = stLead
			} else {
				p.st = stContent
			}
			p.pos += next
		case stLead:
			for p.pos < len(p.buf) && tagscan.IsSpace(p.buf[p.pos]) {
				p.pos++
			}
			if p.pos == len(p.buf) {
				return
			}
			p.st = stContent
		case stContent:
			p.emit(&p.content, p.pos, len(p.buf))
			p.pos = len(p.buf)
			return
		}
	}
}

func (p *thinkParser) toolCallTag() string {
	if p.toolCallEnds {
		return toolCallTag
	}
	return ""
}

func indexOf(b []byte, tag string) int { return bytes.Index(b, []byte(tag)) }
