package toolparse

import "bytes"

// deepseek parses DeepSeek-V3 tool calls:
//
//	<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//	```json
//	{…}
//	```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>
//
// It also accepts the V3.1 form, <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜>,
// and a call block that starts at <｜tool▁call▁begin｜> without the outer tag.
type deepseek struct {
	base
	st     uint8
	args   jsonArgs
	fenced bool
}

const (
	dsCallsBegin = "<｜tool▁calls▁begin｜>"
	dsCallsEnd   = "<｜tool▁calls▁end｜>"
	dsCallBegin  = "<｜tool▁call▁begin｜>"
	dsCallEnd    = "<｜tool▁call▁end｜>"
	dsSep        = "<｜tool▁sep｜>"
	dsFence      = "```"
)

const (
	dProse      = iota
	dOpen       // after the outer tag: expect <｜tool▁call▁begin｜>
	dType       // after call begin: "function" or the name, up to <｜tool▁sep｜>
	dName       // V3: the name, up to a newline
	dFence      // V3: ```json
	dArgs       // streaming arguments
	dFenceEnd   // V3: closing ```
	dCallEnd    // expect <｜tool▁call▁end｜>
	dBetween    // after a call: another call, or the outer end tag
	dRawBefore  // malformed, uncommitted: raw text through the outer end tag
	dRawAfter   // malformed after commit: raw text up to the call's end tag
	dAfterRawCE // after a raw call end: like dBetween
)

func (p *deepseek) run(final bool) {
	for {
		switch p.st {
		case dProse:
			if !p.skipCallWS() {
				return
			}
			rest := p.buf[p.pos:]
			i := bytes.Index(rest, []byte(dsCallsBegin))
			j := bytes.Index(rest, []byte(dsCallBegin))
			if i < 0 && j < 0 {
				p.emitHeld(final, dsCallsBegin, dsCallBegin)
				return
			}
			if i < 0 || (j >= 0 && j < i) {
				p.emitContent(p.pos, p.pos+j)
				p.region = p.pos + j
				p.pos = p.region + len(dsCallBegin)
				p.st = dType
				continue
			}
			p.emitContent(p.pos, p.pos+i)
			p.region = p.pos + i
			p.pos = p.region + len(dsCallsBegin)
			p.st = dOpen
		case dOpen:
			if !p.skipWS() {
				p.truncated(final)
				return
			}
			switch p.match(dsCallBegin) {
			case needMore:
				p.truncated(final)
				return
			case noMatch:
				p.broken(false)
				continue
			}
			p.st = dType
		case dType:
			i := bytes.Index(p.buf[p.pos:], []byte(dsSep))
			if i+len(dsSep)-1 > maxNameLen+len(dsSep) {
				i = -1 // as when streamed in pieces: too long before the separator
			}
			if i < 0 {
				if len(p.buf)-p.pos > maxNameLen+len(dsSep) {
					p.broken(false)
					continue
				}
				p.truncated(final)
				return
			}
			typ := string(bytes.TrimSpace(p.buf[p.pos : p.pos+i]))
			p.pos += i + len(dsSep)
			if typ == "function" {
				p.st = dName
				continue
			}
			if !p.tools.known(typ) {
				p.broken(false)
				continue
			}
			p.args.begin(typ)
			p.fenced = false
			p.st = dArgs
		case dName:
			i := bytes.IndexByte(p.buf[p.pos:], '\n')
			if i > maxNameLen {
				i = -1 // as when streamed in pieces
			}
			if i < 0 {
				if len(p.buf)-p.pos > maxNameLen {
					p.broken(false)
					continue
				}
				p.truncated(final)
				return
			}
			name := string(bytes.TrimSpace(p.buf[p.pos : p.pos+i]))
			p.pos += i + 1
			if !p.tools.known(name) {
				p.broken(false)
				continue
			}
			p.args.begin(name)
			p.fenced = true
			p.st = dFence
		case dFence:
			if !p.skipWS() {
				p.truncated(final)
				return
			}
			switch p.match(dsFence + "json") {
			case needMore:
				p.truncated(final)
				return
			case noMatch:
				p.broken(false)
				continue
			}
			p.st = dArgs
		case dArgs:
			switch p.args.step(&p.base, final) {
			case argWait:
				return
			case argBroken:
				p.broken(false)
				continue
			case argFault:
				p.st = dRawAfter
				continue
			}
			if p.fenced {
				p.st = dFenceEnd
			} else {
				p.st = dCallEnd
			}
		case dFenceEnd, dCallEnd:
			at := p.pos
			if !p.skipWS() {
				p.pos = at // the whitespace may turn out to be content
				return
			}
			tag := dsCallEnd
			if p.st == dFenceEnd {
				tag = dsFence
			}
			switch p.match(tag) {
			case needMore:
				if final {
					p.emitContent(at, len(p.buf))
					p.pos = len(p.buf)
				} else {
					p.pos = at
				}
				return
			case noMatch:
				p.pos = at
				p.st = dRawAfter
				continue
			}
			if p.st == dFenceEnd {
				p.st = dCallEnd
				continue
			}
			p.afterCall = true
			p.st = dBetween
		case dBetween:
			if !p.skipCallWS() {
				return
			}
			p.afterCall = true
			switch p.match(dsCallBegin) {
			case matched:
				p.region = p.pos - len(dsCallBegin)
				p.st = dType
				continue
			case needMore:
				if !final {
					return
				}
			}
			switch p.match(dsCallsEnd) {
			case matched:
				p.st = dProse
				continue
			case needMore:
				if !final {
					return
				}
			}
			p.afterCall = false
			p.st = dProse
		case dRawBefore:
			if !p.rawUntil(dsCallsEnd, true, final) {
				return
			}
			p.st = dProse
		case dRawAfter:
			if !p.rawUntil(dsCallEnd, false, final) {
				return
			}
			p.afterCall = true
			p.st = dBetween
		}
	}
}

// broken handles malformed markup: uncommitted, the region so far and the
// rest of the call block are content; committed, the rest of the call is.
func (p *deepseek) broken(committed bool) {
	if committed {
		p.st = dRawAfter
		return
	}
	p.emitContent(p.region, p.pos)
	p.st = dRawBefore
}
