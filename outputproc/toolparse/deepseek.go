package toolparse

// deepseekSpec parses DeepSeek-V3 tool calls:
//
//	<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//	```json
//	{…}
//	```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>
//
// It also accepts the V3.1 form, <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜>,
// and a call block that starts at <｜tool▁call▁begin｜> without the outer tag.
var deepseekSpec = spec{
	start: dProse, bad: dRawBefore, fault: dRawAfter,
	states: []state{
		dProse:      {op: opProse, tags: []string{dsCallsBegin, dsCallBegin}, tos: []uint8{dOpen, dType}},
		dOpen:       {op: opExpect, tags: []string{dsCallBegin}, tos: []uint8{dType}},
		dType:       {op: opHook, hook: deepseekType},
		dName:       {op: opHook, hook: deepseekName},
		dFence:      {op: opExpect, tags: []string{dsFence + "json"}, tos: []uint8{dFencedArgs}},
		dArgs:       {op: opArgs, to: dCallEnd},
		dFencedArgs: {op: opArgs, to: dFenceEnd},
		dFenceEnd:   {op: opClose, tags: []string{dsFence}, to: dCallEnd},
		dCallEnd:    {op: opClose, tags: []string{dsCallEnd}, to: dBetween, after: setAfter},
		dBetween:    {op: opHook, hook: deepseekBetween},
		dRawBefore:  {op: opRaw, tags: []string{dsCallsEnd}, keep: true, to: dProse},
		dRawAfter:   {op: opRaw, tags: []string{dsCallEnd}, to: dBetween, after: setAfter},
	},
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
	dArgs       // V3.1: streaming arguments
	dFencedArgs // V3: streaming arguments
	dFenceEnd   // V3: closing ```
	dCallEnd    // expect <｜tool▁call▁end｜>
	dBetween    // after a call: another call, or the outer end tag
	dRawBefore  // malformed, uncommitted: raw text through the outer end tag
	dRawAfter   // malformed after commit: raw text up to the call's end tag
)

// deepseekType reads "function" (V3) or the function name (V3.1) up to
// <｜tool▁sep｜>.
func deepseekType(m *machine, final bool) bool {
	typ, ok, goOn := m.field(dsSep, maxNameLen+len(dsSep), final)
	if !ok {
		return goOn
	}
	if typ == "function" {
		return m.then(dName)
	}
	return deepseekCall(m, typ, dArgs)
}

// deepseekName reads the V3 function name up to its newline.
func deepseekName(m *machine, final bool) bool {
	name, ok, goOn := m.field("\n", maxNameLen, final)
	if !ok {
		return goOn
	}
	return deepseekCall(m, name, dFence)
}

// deepseekCall starts the arguments of a call to name at state next, if
// name is one of the tools.
func deepseekCall(m *machine, name string, next uint8) bool {
	if !m.tools.known(name) {
		return m.fail(false)
	}
	m.args.begin(name)
	return m.then(next)
}

// deepseekBetween reads what follows a call: another call, the end of the
// call block, or prose.
func deepseekBetween(m *machine, final bool) bool {
	if !m.skipCallWS() {
		return false
	}
	m.afterCall = true
	switch m.match(dsCallBegin) {
	case matched:
		m.region = m.pos - len(dsCallBegin)
		return m.then(dType)
	case needMore:
		if !final {
			return false
		}
	}
	if mt := m.match(dsCallsEnd); mt != matched {
		if mt == needMore && !final {
			return false
		}
		m.afterCall = false // neither tag: prose follows the calls
	}
	return m.then(dProse)
}
