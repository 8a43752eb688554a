package toolparse

import "bytes"

// hermes parses <tool_call>{"name": …, "arguments": {…}}</tool_call>, as
// Hermes and Qwen2.5/Qwen3 models write it.
type hermes struct {
	base
	st uint8
	w  objWalker
}

const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
)

const (
	hProse     = iota
	hObj       // inside the tag: the call object
	hClose     // after the object: expect </tool_call>
	hRawBefore // malformed, uncommitted: raw text up to and including </tool_call>
	hRawAfter  // malformed after commit: raw text up to </tool_call>
)

func (p *hermes) run(final bool) {
	for {
		switch p.st {
		case hProse:
			if !p.skipCallWS() {
				return
			}
			i := bytes.Index(p.buf[p.pos:], []byte(hermesOpen))
			if i < 0 {
				p.emitHeld(final, hermesOpen)
				return
			}
			p.emitContent(p.pos, p.pos+i)
			p.region = p.pos + i
			p.pos = p.region + len(hermesOpen)
			p.w.reset(false)
			p.st = hObj
		case hObj:
			switch p.w.step(&p.base) {
			case walkMore:
				if !p.w.committed {
					p.truncated(final)
				}
				return
			case walkDone:
				p.st = hClose
			case walkBroken:
				p.broken(p.w.committed)
			}
		case hClose:
			at := p.pos
			if !p.skipWS() {
				p.pos = at // the whitespace may turn out to be content
				return
			}
			switch p.match(hermesClose) {
			case matched:
				p.afterCall = true
				p.st = hProse
			case needMore:
				if final {
					p.emitContent(at, len(p.buf))
					p.pos = len(p.buf)
				} else {
					p.pos = at
				}
				return
			default:
				p.pos = at
				p.st = hRawAfter
			}
		case hRawBefore, hRawAfter:
			after := p.st == hRawAfter
			if !p.rawUntil(hermesClose, !after, final) {
				return
			}
			p.afterCall = after
			p.st = hProse
		}
	}
}

// broken switches to raw mode for malformed markup: before commit the whole
// region so far is content; after commit the rest of the call is.
func (p *hermes) broken(committed bool) {
	if committed {
		p.st = hRawAfter
		return
	}
	p.emitContent(p.region, p.pos)
	p.st = hRawBefore
}
