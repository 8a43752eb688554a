package toolparse

import "bytes"

// mistralSpec parses Mistral tool calls in both tokenizer generations:
// [TOOL_CALLS][{"name": …, "arguments": {…}}, …] (JSON array) and
// [TOOL_CALLS]name[ARGS]{…} (also name[CALL_ID]id[ARGS]{…} and
// name{…}), each call with its own [TOOL_CALLS].
var mistralSpec = spec{
	start: mProse, bad: mProse, fault: mProse,
	states: []state{
		mProse:    {op: opProse, tags: []string{mistralTag}, tos: []uint8{mAfterTag}},
		mAfterTag: {op: opHook, hook: mistralAfterTag},
		mElem:     {op: opHook, hook: mistralElem},
		mObj:      {op: opObj, to: mArrNext},
		mArrNext:  {op: opList, tags: []string{"]"}, to: mElem, tos: []uint8{mProse}, after: setAfter},
		mName:     {op: opHook, hook: mistralName},
		mCallID:   {op: opHook, hook: mistralCallID},
		mArgs:     {op: opArgs, to: mProse, after: setAfter},
	},
}

const (
	mistralTag  = "[TOOL_CALLS]"
	mistralArgs = "[ARGS]"
	mistralID   = "[CALL_ID]"
	maxNameLen  = 256
)

const (
	mProse    = iota
	mAfterTag // after [TOOL_CALLS]: '[' (array form) or a name
	mElem     // in the array: expect an object or ']'
	mObj      // an array element
	mArrNext  // after an element: ',' or ']'
	mName     // reading name up to [ARGS], [CALL_ID] or '{'
	mCallID   // skipping a call id up to [ARGS]
	mArgs     // streaming the arguments value
)

// mistralAfterTag tells the array form from the name form.
func mistralAfterTag(m *machine, final bool) bool {
	ok, array := m.eat(final, '[')
	if !ok || array {
		return ok && m.then(mElem)
	}
	m.nameAt = m.pos
	return m.then(mName)
}

// mistralElem expects an array element or the end of the array.
func mistralElem(m *machine, final bool) bool {
	if c, ok := m.peek(final); !ok || c != ']' {
		return ok && m.then(mObj)
	}
	m.pos++
	if m.inBlock == 0 {
		return m.fail(false) // an empty list is not a call: keep it as text
	}
	m.afterCall = true
	return m.then(mProse)
}

// mistralName reads the function name up to [ARGS], [CALL_ID] or '{'.
func mistralName(m *machine, final bool) bool {
	rest := m.buf[m.pos:]
	i := bytes.IndexAny(rest, "[{")
	if i < 0 {
		return m.noDelim(len(rest) > maxNameLen || bytes.ContainsAny(rest, " \n\t\""), final)
	}
	name := string(bytes.TrimSpace(m.buf[m.nameAt : m.pos+i]))
	m.pos += i
	if !m.tools.known(name) || bytes.ContainsAny(m.buf[m.nameAt:m.pos], "\"") {
		return m.fail(false)
	}
	if m.buf[m.pos] == '[' {
		k, goOn := m.expect(final, mistralArgs, mistralID)
		if k < 0 {
			return goOn
		}
		if k == 1 {
			return m.then(mCallID)
		}
	}
	m.args.begin(name)
	return m.then(mArgs)
}

// mistralCallID skips a call id up to [ARGS].
func mistralCallID(m *machine, final bool) bool {
	if _, ok, goOn := m.field(mistralArgs, maxNameLen, final); !ok {
		return goOn
	}
	name := string(bytes.TrimSpace(m.buf[m.nameAt : bytes.IndexByte(m.buf[m.nameAt:], '[')+m.nameAt]))
	m.args.begin(name)
	return m.then(mArgs)
}
