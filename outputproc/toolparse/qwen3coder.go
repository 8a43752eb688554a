package toolparse

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/sluice-llm/sluice/outputproc/tagscan"
)

// qwen3CoderSpec parses the XML-style calls of Qwen3-Coder:
//
//	<tool_call>
//	<function=NAME>
//	<parameter=P>
//	value
//	</parameter>
//	</function>
//	</tool_call>
//
// Values are typed from the tool's JSON schema, as vLLM's qwen3_coder
// parser does: one leading and one trailing newline are stripped; a string
// parameter (or one the schema does not describe) stays a string, even
// "null", and is streamed as it arrives; integer, number, boolean, object
// and array values are parsed when complete ("null" gives null; objects and
// arrays may also be Python literals), falling back to the string when they
// do not parse. Arguments are written as {"p": v, "q": w}.
var qwen3CoderSpec = spec{
	start: qProse, bad: qRawBefore, fault: qRawAfter,
	states: []state{
		qProse:     {op: opProse, tags: []string{hermesOpen}, tos: []uint8{qOpen}},
		qOpen:      {op: opExpect, tags: []string{qcFunc}, tos: []uint8{qFname}},
		qFname:     {op: opHook, hook: qwenFname},
		qBody:      {op: opExpect, tags: []string{qcParam, qcFuncEnd}, tos: []uint8{qPname, qAfterFn}},
		qPname:     {op: opHook, hook: qwenPname},
		qPvalStart: {op: opHook, hook: qwenPvalStart},
		qPval:      {op: opHook, hook: qwenPval},
		qAfterFn:   {op: opHook, hook: qwenAfterFn},
		qRawBefore: {op: opRaw, tags: []string{hermesClose}, keep: true, to: qProse, after: clearAfter},
		qRawAfter:  {op: opRaw, tags: []string{hermesClose}, to: qProse, after: setAfter},
	},
}

const (
	qcFunc     = "<function="
	qcFuncEnd  = "</function>"
	qcParam    = "<parameter="
	qcParamEnd = "</parameter>"
)

const (
	qProse     = iota
	qOpen      // after <tool_call>: expect <function=
	qFname     // function name up to '>'
	qBody      // a parameter or </function>
	qPname     // parameter name up to '>'
	qPvalStart // the value's leading newline
	qPval      // the value, up to a terminator
	qAfterFn   // </tool_call> or another <function=
	qRawBefore // malformed, uncommitted
	qRawAfter  // malformed after commit
)

// qwenFname reads the function name up to '>' and commits the call.
func qwenFname(m *machine, final bool) bool {
	name, ok, goOn := m.field(">", maxNameLen, final)
	if !ok {
		return goOn
	}
	if !m.tools.known(name) {
		return m.fail(false)
	}
	m.fn = name
	m.beginCall(name)
	m.openArgs()
	m.nargs = 0
	return m.then(qBody)
}

// qwenPname reads a parameter name up to '>' and writes its key.
func qwenPname(m *machine, final bool) bool {
	// More than maxNameLen bytes without '>' end the call here.
	name, ok, goOn := m.field(">", maxNameLen, final)
	if !ok {
		return goOn
	}
	m.typ = paramKind(m.tools.paramType(m.fn, name))
	m.tmp = m.tmp[:0]
	if m.nargs > 0 {
		m.tmp = append(m.tmp, ", "...)
	}
	m.nargs++
	m.tmp = append(m.tmp, quoteJSON(name)...)
	m.tmp = append(m.tmp, ": "...)
	if m.typ == "string" {
		m.tmp = append(m.tmp, '"')
	}
	m.addArgs(string(m.tmp))
	return m.then(qPvalStart)
}

// qwenPvalStart skips the value's leading newline.
func qwenPvalStart(m *machine, final bool) bool {
	if m.pos == len(m.buf) {
		return m.wait(final)
	}
	if m.buf[m.pos] == '\n' {
		m.pos++
	}
	m.valAt, m.emitted, m.scanFrom = m.pos, m.pos, m.pos
	return m.then(qPval)
}

// qwenPval streams the current parameter value until it ends.
func qwenPval(m *machine, final bool) bool {
	return qwenValue(m, final) && m.then(qBody)
}

// qwenAfterFn expects </tool_call> or another <function=, after the
// call's arguments were closed at </function>.
func qwenAfterFn(m *machine, final bool) bool {
	m.closeArgs()
	if !m.skipWS() {
		m.afterCall = true
		return false
	}
	m1 := m.match(hermesClose)
	if m1 == matched {
		m.afterCall = true
		return m.then(qProse)
	}
	m2 := m.match(qcFunc)
	if m2 == matched {
		m.region = m.pos - len(qcFunc)
		return m.then(qFname)
	}
	if (m1 == needMore || m2 == needMore) && !final {
		return false
	}
	return m.then(qRawAfter)
}

// qwenValue scans the current parameter value; true when it ended.
func qwenValue(m *machine, final bool) bool {
	rest := m.buf[m.scanFrom:]
	end, next := -1, 0
	for _, t := range [...]string{qcParamEnd, qcParam, qcFuncEnd} {
		if i := bytes.Index(rest, []byte(t)); i >= 0 && (end < 0 || i < end) {
			end, next = i, i
			if t == qcParamEnd {
				next += len(t)
			}
		}
	}
	if end < 0 {
		if final {
			qwenEndValue(m, len(m.buf))
			m.pos = len(m.buf)
			m.closeArgs()
			return false
		}
		safe := len(m.buf) - tagscan.PartialSuffix(m.buf[m.valAt:], qcParamEnd, qcParam, qcFuncEnd)
		if safe > m.valAt && m.buf[safe-1] == '\n' {
			safe--
		}
		if m.typ == "string" && safe > m.emitted {
			if needsEscape(m.buf[m.emitted:safe]) {
				m.tmp = escapeJSON(m.tmp[:0], m.buf[m.emitted:safe])
				m.addArgs(string(m.tmp))
			} else {
				m.addArgs(m.str(m.emitted, safe))
			}
			m.emitted = safe
		}
		m.pos = len(m.buf)
		if s := len(m.buf) - len(qcParamEnd) + 1; s > m.scanFrom {
			m.scanFrom = s
		}
		return false
	}
	stop := m.scanFrom + end
	if stop > m.valAt && m.buf[stop-1] == '\n' {
		stop--
	}
	qwenEndValue(m, stop)
	m.pos = m.scanFrom + next
	return true
}

// qwenEndValue writes the rest of the value buf[valAt:stop].
func qwenEndValue(m *machine, stop int) {
	if stop < m.emitted {
		stop = m.emitted
	}
	if m.typ == "string" {
		m.tmp = escapeJSON(m.tmp[:0], m.buf[m.emitted:stop])
		m.tmp = append(m.tmp, '"')
		m.addArgs(string(m.tmp))
		m.emitted = stop
		return
	}
	m.addArgs(typedValue(m.typ, string(m.buf[m.valAt:stop])))
}

// paramKind folds a schema type into the kinds values are converted by.
func paramKind(t string) string {
	t = strings.ToLower(t)
	switch {
	case t == "" || t == "string" || t == "str" || t == "text" || t == "varchar" || t == "char" || t == "enum":
		return "string"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint") || t == "long" || t == "short" || t == "unsigned":
		return "integer"
	case strings.HasPrefix(t, "num") || strings.HasPrefix(t, "float") || t == "double":
		return "number"
	case t == "boolean" || t == "bool" || t == "binary":
		return "boolean"
	}
	return "json"
}

// typedValue converts a complete non-string parameter value to JSON,
// falling back to a JSON string.
func typedValue(kind, v string) string {
	t := strings.TrimSpace(v)
	if strings.EqualFold(t, "null") {
		return "null"
	}
	switch kind {
	case "integer":
		if n, err := strconv.ParseInt(t, 10, 64); err == nil {
			return strconv.FormatInt(n, 10)
		}
	case "number":
		if f, err := strconv.ParseFloat(t, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
				return strconv.FormatInt(int64(f), 10)
			}
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	case "boolean":
		switch strings.ToLower(t) {
		case "true":
			return "true"
		case "false":
			return "false"
		}
	default:
		if json.Valid([]byte(t)) {
			var buf bytes.Buffer
			if json.Compact(&buf, []byte(t)) == nil {
				return buf.String()
			}
		}
		if j, ok := pyToJSON([]byte(t)); ok {
			return string(j)
		}
	}
	return quoteJSON(v)
}
