package toolparse

import "bytes"

// machine is the one streaming state machine every family runs: prose →
// header → arguments → close, and back to prose. A family is a spec: a table
// of states, most of them generic steps parameterised by the family's
// markers (find an opener in prose, expect a tag, read a JSON call object,
// stream a JSON arguments value, expect a closing tag, pass malformed markup
// through as content up to a tag), plus a few small hooks where a syntax has
// a step of its own (a name up to a delimiter, Python keyword arguments,
// XML-ish parameters that are converted to JSON argument fragments).
type machine struct {
	base
	spec *spec
	st   uint8 // index into spec.states

	w    objWalker // opObj
	args jsonArgs  // opArgs

	// Hook state: what the family hooks keep between steps.
	inBlock  int    // calls read in the current block (mistral array, pythonic list)
	nameAt   int    // where the function name starts (mistral)
	fn       string // the current call's function (qwen3_coder)
	nargs    int    // arguments written in the current call
	key      string // the current argument's name (pythonic)
	typ      string // the current parameter's kind (qwen3_coder)
	valAt    int    // the current argument value's first byte
	emitted  int    // a streamed string value sent up to here (qwen3_coder)
	scanFrom int    // where to resume looking for a value's end (qwen3_coder)
	py       pyScan // the current Python argument value (pythonic)
	tmp      []byte // scratch for building argument fragments
}

// spec is one family's machine: its states, where it starts, and where
// malformed markup leads.
type spec struct {
	states []state
	start  uint8
	// bad is the state after markup found malformed before its call was
	// committed (the markup so far has been sent as content); fault the
	// state after a committed call's markup turned malformed.
	bad, fault uint8
}

// op is the kind of step a state takes.
type op uint8

const (
	// opProse sends prose up to the earliest of tags (an opener), holding
	// back a tail that may still become one, then goes to tos[k] for
	// tags[k]. Whitespace right after a call is held (base.skipCallWS).
	opProse op = iota
	// opExpect skips whitespace and expects one of tags, going to tos[k]
	// for tags[k]; anything else is malformed markup (see expect).
	opExpect
	// opObj reads a JSON call object {"name": …, "arguments": …} (strict:
	// unknown keys make it prose), streaming its arguments.
	opObj
	// opArgs streams a JSON arguments value for the call whose name a hook
	// gave (jsonArgs.begin).
	opArgs
	// opClose skips whitespace and expects the closing tags[0]; anything
	// else after the committed call goes to spec.fault.
	opClose
	// opRaw sends malformed markup as content up to tags[0] (and tags[0]
	// itself when keep).
	opRaw
	// opList follows an element of a list: ',' goes to to (marking the
	// region there when keep), the list's closing byte tags[0] closes any
	// built arguments and goes to tos[0]; anything else is a fault.
	opList
	// opRest sends everything that follows as content (pythonic: a list
	// is recognised only at the start).
	opRest
	// opHook runs the family's own step.
	opHook
)

// afterRule says what leaving a state does to base.afterCall.
type afterRule uint8

const (
	keepAfter  afterRule = iota // leave it
	setAfter                    // a call just ended: whitespace after it is held
	clearAfter                  // prose follows
)

// state is one row of a family's table.
type state struct {
	op    op
	tags  []string  // the markers the step looks for
	tos   []uint8   // opProse, opExpect, opList: the next state for each of tags
	to    uint8     // the next state when the step succeeds
	after afterRule // what succeeding does to afterCall
	// keep: opRaw sends the end tag as content too; opList marks the
	// region after ','.
	keep   bool
	strict bool // opObj: only name/arguments/parameters/type/id keys
	// hook is opHook's step: it reports whether the machine may go on
	// (false: wait for more text).
	hook func(m *machine, final bool) bool
}

// newMachine returns a machine for s over the shared state b.
func newMachine(s *spec, b base) *machine {
	m := &machine{base: b, spec: s}
	m.goTo(s.start)
	return m
}

// Add implements Parser.
func (m *machine) Add(text string) Delta {
	m.add(text)
	m.run(false)
	return m.take()
}

// Finish implements Parser.
func (m *machine) Finish() Delta {
	m.run(true)
	return m.end()
}

// run advances the machine over the text added so far (final at the end
// of output).
func (m *machine) run(final bool) {
	for m.step(final) {
	}
}

// goTo enters state st.
func (m *machine) goTo(st uint8) {
	m.st = st
	if s := &m.spec.states[st]; s.op == opObj {
		m.w.reset(s.strict)
	}
}

// leave applies s's afterCall rule and enters s.to.
func (m *machine) leave(s *state) {
	switch s.after {
	case setAfter:
		m.afterCall = true
	case clearAfter:
		m.afterCall = false
	}
	m.goTo(s.to)
}

// broken handles malformed markup: before its call was committed the
// markup so far is content; after, a built arguments object is closed so
// that it stays valid JSON.
func (m *machine) broken(committed bool) {
	if committed {
		m.closeArgs()
		m.goTo(m.spec.fault)
		return
	}
	m.emitContent(m.region, m.pos)
	m.goTo(m.spec.bad)
}

// step takes one step of the current state; false when the machine must
// wait for more text.
func (m *machine) step(final bool) bool {
	s := &m.spec.states[m.st]
	switch s.op {
	case opProse:
		if !m.skipCallWS() {
			return false
		}
		rest := m.buf[m.pos:]
		k, at := -1, 0
		for i, t := range s.tags {
			if j := bytes.Index(rest, []byte(t)); j >= 0 && (k < 0 || j < at) {
				k, at = i, j
			}
		}
		if k < 0 {
			m.emitHeld(final, s.tags...)
			return false
		}
		m.emitContent(m.pos, m.pos+at)
		m.region = m.pos + at
		m.pos = m.region + len(s.tags[k])
		m.inBlock = 0
		m.goTo(s.tos[k])
	case opExpect:
		k, goOn := m.expect(final, s.tags...)
		if k < 0 {
			return goOn
		}
		m.goTo(s.tos[k])
	case opObj:
		switch m.w.step(&m.base) {
		case walkMore:
			if !m.w.committed {
				m.truncated(final)
			}
			return false
		case walkBroken:
			m.broken(m.w.committed)
			return true
		}
		m.inBlock++
		m.region = m.pos // a later fault keeps this call
		m.leave(s)
	case opArgs:
		switch m.args.step(&m.base, final) {
		case argWait:
			return false
		case argBroken:
			m.broken(false)
			return true
		case argFault:
			m.broken(true)
			return true
		}
		m.leave(s)
	case opClose:
		at := m.pos
		if !m.skipWS() {
			m.pos = at // the whitespace may turn out to be content
			return false
		}
		switch m.match(s.tags[0]) {
		case needMore:
			if final {
				m.emitContent(at, len(m.buf))
				m.pos = len(m.buf)
			} else {
				m.pos = at
			}
			return false
		case noMatch:
			m.pos = at
			m.goTo(m.spec.fault)
			return true
		}
		m.leave(s)
	case opRaw:
		if !m.rawUntil(s.tags[0], s.keep, final) {
			return false
		}
		m.leave(s)
	case opList:
		if !m.skipWS() {
			m.finishCall(final)
			return false
		}
		switch m.buf[m.pos] {
		case ',':
			m.pos++
			if s.keep {
				m.region = m.pos
			}
			m.goTo(s.to)
		case s.tags[0][0]:
			m.pos++
			m.closeArgs()
			if s.after == setAfter {
				m.afterCall = true
			}
			m.goTo(s.tos[0])
		default:
			m.broken(true)
		}
	case opRest:
		if m.skipCallWS() {
			m.emitHeld(true)
		}
		return false
	case opHook:
		return s.hook(m, final)
	}
	return true
}

// field reads a field (a name, a call id) ended by delim within limit
// bytes of the cursor, and consumes it with its delimiter: the field
// without surrounding whitespace, and true. When delim has not come it
// returns false and whether the machine goes on: markup already too long
// to hold the field is malformed (see broken); otherwise wait. The outcome
// does not depend on how the text was split into deltas.
func (m *machine) field(delim string, limit int, final bool) (f string, ok, goOn bool) {
	i := bytes.Index(m.buf[m.pos:], []byte(delim))
	if i+len(delim)-1 > limit {
		i = -1 // as when streamed in pieces
	}
	if i < 0 {
		return "", false, m.noDelim(len(m.buf)-m.pos > limit, final)
	}
	f = string(bytes.TrimSpace(m.buf[m.pos : m.pos+i]))
	m.pos += i + len(delim)
	return f, true, true
}

// noDelim handles a delimiter that has not come: markup too long to hold
// the field is malformed (see broken), otherwise wait.
func (m *machine) noDelim(long, final bool) bool {
	if long {
		return m.fail(m.argsOpen)
	}
	return m.wait(final)
}

// leadingWS holds whitespace at the start of the output (dropped if a call
// follows); false when the text ends first, after which at the end of
// output the whitespace is content.
func (m *machine) leadingWS(final bool) bool {
	start := m.pos
	more := m.skipWS()
	if m.pos > start {
		if !m.wsPend {
			m.wsPend, m.wsStart = true, start
		}
		m.wsEnd = m.pos
	}
	if !more && final {
		m.flushWS()
	}
	return more
}

// then enters st; the machine goes on.
func (m *machine) then(st uint8) bool {
	m.goTo(st)
	return true
}

// fail handles malformed markup (see broken); the machine goes on.
func (m *machine) fail(committed bool) bool {
	m.broken(committed)
	return true
}

// wait handles the end of the text inside markup: at the end of output
// an uncommitted call's markup is content and a committed call's built
// arguments are closed.
func (m *machine) wait(final bool) bool {
	if m.argsOpen {
		m.finishCall(final)
	} else {
		m.truncated(final)
	}
	return false
}

// peek skips whitespace and returns the byte at the cursor; false (after
// wait) when the text ends first.
func (m *machine) peek(final bool) (byte, bool) {
	if !m.skipWS() {
		return 0, m.wait(final)
	}
	return m.buf[m.pos], true
}

// eat skips whitespace and consumes c if it comes next (ate); ok is false
// (after wait) when the text ends first.
func (m *machine) eat(final bool, c byte) (ok, ate bool) {
	got, ok := m.peek(final)
	if ok && got == c {
		m.pos++
		return true, true
	}
	return ok, false
}

// expect skips whitespace and consumes the first of tags at the cursor,
// returning its index. Otherwise it returns -1 and whether the machine
// goes on: the text may still become one of tags (wait), or it is
// malformed markup (broken; committed when inside a built arguments
// object).
func (m *machine) expect(final bool, tags ...string) (int, bool) {
	if _, ok := m.peek(final); !ok {
		return -1, false
	}
	for k, t := range tags {
		switch m.match(t) {
		case matched:
			return k, true
		case needMore:
			return -1, m.wait(final)
		}
	}
	return -1, m.fail(m.argsOpen)
}
