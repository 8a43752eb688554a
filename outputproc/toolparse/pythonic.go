package toolparse

import "bytes"

// pythonic parses a Python list of calls, [f(a=1, b="x"), g()], as Llama 3.2
// and Llama 4 models write it (optionally inside <|python_start|> …
// <|python_end|>). As in vLLM, the list is recognised only at the start of
// the answer; anything else is prose. Keyword arguments are converted from
// Python literals to JSON and sent one at a time.
type pythonic struct {
	base
	st     uint8
	scan   pyScan
	key    string
	valAt  int
	nkw    int
	inList int // calls committed in this list
	tmp    []byte
}

const (
	pyStart = "<|python_start|>"
	pyEnd   = "<|python_end|>"
)

const (
	pStart     = iota // leading whitespace, optional <|python_start|>, '['
	pOpen             // a call: name '('
	pKw               // a keyword argument or ')'
	pVal              // the argument's value
	pAfterKw          // ',' or ')'
	pAfterCall        // ',' or ']'
	pEnd              // optional <|python_end|>
	pProse            // everything else is content
)

func (p *pythonic) run(final bool) {
	for {
		switch p.st {
		case pStart:
			start := p.pos
			more := p.skipWS()
			if p.pos > start {
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
			p.region = p.pos
			m := p.match(pyStart)
			if m == needMore && !final {
				return
			}
			if m == matched && !p.skipWS() {
				if final {
					p.truncated(final)
				} else {
					p.pos = p.region // look again when more text comes
				}
				return
			}
			if p.pos < len(p.buf) && p.buf[p.pos] == '[' {
				p.pos++
				p.st = pOpen
				continue
			}
			p.pos = p.region
			p.st = pProse
		case pOpen:
			if !p.skipWS() {
				p.truncated(final)
				return
			}
			j := p.pos
			for j < len(p.buf) && (isIdent(p.buf[j]) || p.buf[j] == '.') {
				j++
			}
			if j == len(p.buf) && j-p.pos <= maxNameLen {
				p.truncated(final)
				return
			}
			name := string(p.buf[p.pos:j])
			if j == len(p.buf) || p.buf[j] != '(' || !p.tools.known(name) {
				if p.inList == 0 {
					p.pos = j
				} else {
					p.pos = p.region
				}
				p.broken()
				continue
			}
			p.pos = j + 1
			p.beginCall(name)
			p.openArgs()
			p.nkw = 0
			p.inList++
			p.st = pKw
		case pKw:
			if !p.skipWS() {
				p.finishCall(final)
				return
			}
			if p.buf[p.pos] == ')' {
				p.pos++
				p.closeArgs()
				p.st = pAfterCall
				continue
			}
			j := p.pos
			for j < len(p.buf) && isIdent(p.buf[j]) {
				j++
			}
			k := j
			for k < len(p.buf) && isSpace(p.buf[k]) {
				k++
			}
			if k == len(p.buf) {
				p.finishCall(final)
				return
			}
			if j == p.pos || p.buf[k] != '=' || (k+1 < len(p.buf) && p.buf[k+1] == '=') {
				p.broken()
				continue
			}
			if k+1 == len(p.buf) {
				p.finishCall(final)
				return
			}
			p.key = string(p.buf[p.pos:j])
			p.pos = k + 1
			p.skipWS()
			p.valAt = p.pos
			p.scan = pyScan{}
			p.st = pVal
		case pVal:
			n, done := p.scan.feed(p.buf[p.pos:])
			p.pos += n
			if !done {
				if final {
					p.writeKw(p.buf[p.valAt:p.pos], true)
					p.closeArgs()
				}
				return
			}
			if !p.writeKw(p.buf[p.valAt:p.pos], false) {
				p.broken()
				continue
			}
			p.st = pAfterKw
		case pAfterKw:
			if !p.skipWS() {
				p.finishCall(final)
				return
			}
			switch p.buf[p.pos] {
			case ',':
				p.pos++
				p.st = pKw
			case ')':
				p.pos++
				p.closeArgs()
				p.st = pAfterCall
			default:
				p.broken()
			}
		case pAfterCall:
			if !p.skipWS() {
				return
			}
			switch p.buf[p.pos] {
			case ',':
				p.pos++
				p.region = p.pos
				p.st = pOpen
			case ']':
				p.pos++
				p.afterCall = true
				p.st = pEnd
			default:
				p.broken()
			}
		case pEnd:
			if !p.skipCallWS() {
				return
			}
			if p.match(pyEnd) == needMore && !final {
				return
			}
			p.afterCall = true
			p.st = pProse
		case pProse:
			if !p.skipCallWS() {
				return
			}
			p.emitHeld(true)
			return
		}
	}
}

// writeKw sends one keyword argument; false when the value is not a Python
// literal (unless partial, where the raw text is sent as a string).
func (p *pythonic) writeKw(raw []byte, partial bool) bool {
	v, ok := pyToJSON(raw)
	if !ok && partial {
		// A string cut off by the end of output: close its quote.
		if t := bytes.TrimSpace(raw); len(t) > 0 && (t[0] == '"' || t[0] == '\'') {
			v, ok = pyToJSON(append(t[:len(t):len(t)], t[0]))
		}
		if !ok {
			v, ok = []byte(quoteJSON(string(raw))), true
		}
	}
	if !ok {
		return false
	}
	p.tmp = p.tmp[:0]
	if p.nkw > 0 {
		p.tmp = append(p.tmp, ", "...)
	}
	p.nkw++
	p.tmp = append(p.tmp, quoteJSON(p.key)...)
	p.tmp = append(p.tmp, ": "...)
	p.tmp = append(p.tmp, v...)
	p.addArgs(string(p.tmp))
	return true
}

// broken ends the list at malformed text: before any call the list so far
// is content; after a commit the call is closed and the rest is content.
func (p *pythonic) broken() {
	if p.inList == 0 {
		p.emitContent(p.region, p.pos)
	} else {
		p.closeArgs()
	}
	p.st = pProse
}

// pyScan finds where a Python literal argument ends: at a ',' or ')' outside
// brackets and strings. It is resumable, so a long value is scanned once.
type pyScan struct {
	depth int
	quote byte
	esc   bool
}

// feed scans b; it returns the bytes that belong to the value and whether
// the value ended (at b[n]).
func (s *pyScan) feed(b []byte) (int, bool) {
	for i, c := range b {
		switch {
		case s.quote != 0:
			switch {
			case s.esc:
				s.esc = false
			case c == '\\':
				s.esc = true
			case c == s.quote:
				s.quote = 0
			}
		case c == '\'' || c == '"':
			s.quote = c
		case c == '(' || c == '[' || c == '{':
			s.depth++
		case c == ')' || c == ']' || c == '}':
			if s.depth == 0 {
				return i, true
			}
			s.depth--
		case c == ',' && s.depth == 0:
			return i, true
		}
	}
	return len(b), false
}
