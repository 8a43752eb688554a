package toolparse

// llama3Spec parses Llama 3.x JSON tool calls: an optional <|python_tag|>,
// then {"name": …, "parameters"|"arguments": {…}} objects separated by ';'. A
// bare object is recognised only at the start of the answer; after prose,
// only <|python_tag|> starts calls.
var llama3Spec = spec{
	start: lStart, bad: lProse, fault: lProse,
	states: []state{
		lStart: {op: opHook, hook: llamaStart},
		lProse: {op: opProse, tags: []string{llamaTag}, tos: []uint8{lTag}},
		lTag:   {op: opHook, hook: llamaTagged},
		lObj:   {op: opObj, strict: true, to: lNext, after: setAfter},
		lNext:  {op: opHook, hook: llamaNext},
		lSemi:  {op: opHook, hook: llamaSemi},
	},
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

// llamaStart recognises a bare call object at the start of the answer.
func llamaStart(m *machine, final bool) bool {
	return m.leadingWS(final) && llamaObj(m)
}

// llamaTagged expects the call object after <|python_tag|>.
func llamaTagged(m *machine, final bool) bool {
	c, ok := m.peek(final)
	if !ok {
		return false
	}
	if c != '{' {
		return m.fail(false)
	}
	return m.then(lObj)
}

// llamaNext reads what follows a call: ';' starts another.
func llamaNext(m *machine, _ bool) bool {
	if !m.skipCallWS() {
		return false
	}
	if m.buf[m.pos] != ';' {
		return m.then(lProse)
	}
	m.pos++
	m.afterCall = true
	return m.then(lSemi)
}

// llamaSemi reads the call after ';', if one follows.
func llamaSemi(m *machine, _ bool) bool {
	return m.skipCallWS() && llamaObj(m)
}

// llamaObj starts a call object at '{'; anything else is prose.
func llamaObj(m *machine) bool {
	if m.buf[m.pos] != '{' {
		return m.then(lProse)
	}
	m.region = m.pos
	return m.then(lObj)
}
