package toolparse

import (
	"bytes"

	"github.com/sluice-llm/sluice/outputproc/tagscan"
)

// pythonicSpec parses a Python list of calls, [f(a=1, b="x"), g()], as
// Llama 3.2 and Llama 4 models write it (optionally inside <|python_start|>
// … <|python_end|>). As in vLLM, the list is recognised only at the start of
// the answer; anything else is prose. Keyword arguments are converted from
// Python literals to JSON and sent one at a time.
var pythonicSpec = spec{
	start: pStart, bad: pProse, fault: pProse,
	states: []state{
		pStart:     {op: opHook, hook: pyStartList},
		pOpen:      {op: opHook, hook: pyOpen},
		pKw:        {op: opHook, hook: pyKeyword},
		pVal:       {op: opHook, hook: pyValue},
		pAfterKw:   {op: opList, tags: []string{")"}, to: pKw, tos: []uint8{pAfterCall}},
		pAfterCall: {op: opList, tags: []string{"]"}, to: pOpen, tos: []uint8{pEnd}, keep: true, after: setAfter},
		pEnd:       {op: opHook, hook: pyEndList},
		pProse:     {op: opRest},
	},
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

// pyStartList recognises the list at the start of the answer.
func pyStartList(m *machine, final bool) bool {
	if !m.leadingWS(final) {
		return false
	}
	m.region = m.pos
	mt := m.match(pyStart)
	if mt == needMore && !final {
		return false
	}
	if mt == matched && !m.skipWS() {
		if final {
			m.truncated(final)
		} else {
			m.pos = m.region // look again when more text comes
		}
		return false
	}
	if m.pos < len(m.buf) && m.buf[m.pos] == '[' {
		m.pos++
		return m.then(pOpen)
	}
	m.pos = m.region
	return m.then(pProse)
}

// pyOpen reads a call's name and '(' and commits the call.
func pyOpen(m *machine, final bool) bool {
	if _, ok := m.peek(final); !ok {
		return false
	}
	j := m.pos
	for j < len(m.buf) && (isIdent(m.buf[j]) || m.buf[j] == '.') {
		j++
	}
	if j == len(m.buf) && j-m.pos <= maxNameLen {
		return m.wait(final)
	}
	name := string(m.buf[m.pos:j])
	if j == len(m.buf) || m.buf[j] != '(' || !m.tools.known(name) {
		if m.inBlock == 0 {
			m.pos = j
		} else {
			m.pos = m.region
		}
		return m.fail(m.inBlock > 0)
	}
	m.pos = j + 1
	m.beginCall(name)
	m.openArgs()
	m.nargs = 0
	m.inBlock++
	return m.then(pKw)
}

// pyKeyword reads a keyword argument's name and '=', or the call's ')'.
func pyKeyword(m *machine, final bool) bool {
	if ok, end := m.eat(final, ')'); !ok || end {
		return ok && pyCallEnd(m)
	}
	j := m.pos
	for j < len(m.buf) && isIdent(m.buf[j]) {
		j++
	}
	k := j
	for k < len(m.buf) && tagscan.IsSpace(m.buf[k]) {
		k++
	}
	if k == len(m.buf) {
		return m.wait(final)
	}
	if j == m.pos || m.buf[k] != '=' || (k+1 < len(m.buf) && m.buf[k+1] == '=') {
		return m.fail(true)
	}
	if k+1 == len(m.buf) {
		return m.wait(final)
	}
	m.key = string(m.buf[m.pos:j])
	m.pos = k + 1
	m.skipWS()
	m.valAt = m.pos
	m.py = pyScan{}
	return m.then(pVal)
}

// pyCallEnd closes the call's arguments at its ')'.
func pyCallEnd(m *machine) bool {
	m.closeArgs()
	return m.then(pAfterCall)
}

// pyValue scans a keyword argument's value and sends it as JSON.
func pyValue(m *machine, final bool) bool {
	n, done := m.py.feed(m.buf[m.pos:])
	m.pos += n
	if !done {
		if final {
			pyWriteKw(m, m.buf[m.valAt:m.pos], true)
			m.closeArgs()
		}
		return false
	}
	if !pyWriteKw(m, m.buf[m.valAt:m.pos], false) {
		return m.fail(true)
	}
	return m.then(pAfterKw)
}

// pyEndList skips an optional <|python_end|> after the list.
func pyEndList(m *machine, final bool) bool {
	if !m.skipCallWS() {
		return false
	}
	if m.match(pyEnd) == needMore && !final {
		return false
	}
	m.afterCall = true
	return m.then(pProse)
}

// pyWriteKw sends one keyword argument; false when the value is not a
// Python literal (unless partial, where the raw text is sent as a string).
func pyWriteKw(m *machine, raw []byte, partial bool) bool {
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
	m.tmp = m.tmp[:0]
	if m.nargs > 0 {
		m.tmp = append(m.tmp, ", "...)
	}
	m.nargs++
	m.tmp = append(m.tmp, quoteJSON(m.key)...)
	m.tmp = append(m.tmp, ": "...)
	m.tmp = append(m.tmp, v...)
	m.addArgs(string(m.tmp))
	return true
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
