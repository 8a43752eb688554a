package toolparse

import "bytes"

// llama3 parses Llama 3.x JSON tool calls: an optional <|python_tag|>, then
// {"name": …, "parameters"|"arguments": {…}} objects separated by ';'. A
// bare object is recognised only at the start of the answer; after prose,
// only <|python_tag|> starts calls.
type llama3 struct {
	base
	st uint8
	w  objWalker
}

const llamaTag = "<|python_tag|>"

const (
	lStart = iota // start of output: leading whitespace, then tag, '{' or prose
	lProse
	lTag  // after <|python_tag|>: expect '{'
	lObj  // a call object
	lNext // after a call: ';' or anything else
	lSemi // after ';': '{', a tag, or prose
)

func (p *llama3) run(final bool) {
	for {
		switch p.st {
		case lStart:
			start := p.pos
			more := p.skipWS()
			if p.pos > start {
				// Leading whitespace is dropped if a call follows.
				if !p.wsPend {
					p.wsPend, p.wsStart = true, start
				}
				p.wsEnd = p.pos
			}
			if !more {
				if final {
					p.flushWS()
				}
				return
			}
			if p.buf[p.pos] == '{' {
				p.startObj()
				continue
			}
			p.st = lProse
		case lProse:
			if !p.skipCallWS() {
				return
			}
			i := bytes.Index(p.buf[p.pos:], []byte(llamaTag))
			if i < 0 {
				p.emitHeld(final, llamaTag)
				return
			}
			p.emitContent(p.pos, p.pos+i)
			p.region = p.pos + i
			p.pos = p.region + len(llamaTag)
			p.st = lTag
		case lTag:
			if !p.skipWS() {
				p.truncated(final)
				return
			}
			if p.buf[p.pos] != '{' {
				p.emitContent(p.region, p.pos)
				p.st = lProse
				continue
			}
			p.w.reset(true)
			p.st = lObj
		case lObj:
			switch p.w.step(&p.base) {
			case walkMore:
				if !p.w.committed {
					p.truncated(final)
				}
				return
			case walkDone:
				p.afterCall = true
				p.st = lNext
			case walkBroken:
				if !p.w.committed {
					p.emitContent(p.region, p.pos)
				}
				p.st = lProse
			}
		case lNext:
			if !p.skipCallWS() {
				return
			}
			if p.buf[p.pos] == ';' {
				p.pos++
				p.afterCall = true
				p.st = lSemi
				continue
			}
			p.st = lProse
		case lSemi:
			if !p.skipCallWS() {
				return
			}
			if p.buf[p.pos] == '{' {
				p.startObj()
				continue
			}
			p.st = lProse
		}
	}
}

func (p *llama3) startObj() {
	p.region = p.pos
	p.w.reset(true)
	p.st = lObj
}
