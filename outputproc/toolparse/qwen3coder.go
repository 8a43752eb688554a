package toolparse

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// qwen3Coder parses the XML-style calls of Qwen3-Coder:
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
type qwen3Coder struct {
	base
	st       uint8
	fn       string // current function
	nparams  int    // parameters written in the current call
	typ      string // current parameter's type
	valStart int    // current value's first byte
	emitted  int    // string value sent up to here
	scanFrom int    // where to resume looking for the value's end
	tmp      []byte
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

func (p *qwen3Coder) run(final bool) {
	for {
		switch p.st {
		case qProse:
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
			p.st = qOpen
		case qOpen:
			if !p.skipWS() {
				p.truncated(final)
				return
			}
			switch p.match(qcFunc) {
			case needMore:
				p.truncated(final)
				return
			case noMatch:
				p.broken()
				continue
			}
			p.st = qFname
		case qFname:
			start := p.pos
			name, ok := p.upTo('>')
			if ok && p.pos-1-start > maxNameLen {
				p.pos, ok = start, false // as when streamed in pieces
			}
			if !ok {
				if len(p.buf)-p.pos > maxNameLen {
					p.broken()
					continue
				}
				p.truncated(final)
				return
			}
			if !p.tools.known(name) {
				p.broken()
				continue
			}
			p.fn = name
			p.beginCall(name)
			p.openArgs()
			p.nparams = 0
			p.st = qBody
		case qBody:
			if !p.skipWS() {
				p.finishCall(final)
				return
			}
			m1 := p.match(qcParam)
			if m1 == matched {
				p.st = qPname
				continue
			}
			m2 := p.match(qcFuncEnd)
			if m2 == matched {
				p.closeArgs()
				p.st = qAfterFn
				continue
			}
			if m1 == needMore || m2 == needMore {
				p.finishCall(final)
				return
			}
			p.closeArgs()
			p.st = qRawAfter
		case qPname:
			start := p.pos
			name, ok := p.upTo('>')
			if ok && p.pos-1-start > maxNameLen {
				// The same outcome whatever the chunking: streamed in pieces,
				// more than maxNameLen bytes without '>' end the call here.
				p.pos, ok = start, false
			}
			if !ok {
				if len(p.buf)-p.pos > maxNameLen {
					p.closeArgs()
					p.st = qRawAfter
					continue
				}
				p.finishCall(final)
				return
			}
			p.typ = paramKind(p.tools.paramType(p.fn, name))
			sep := ", "
			if p.nparams == 0 {
				sep = ""
			}
			p.nparams++
			s := sep + quoteJSON(name) + ": "
			if p.typ == "string" {
				s += `"`
			}
			p.addArgs(s)
			p.st = qPvalStart
		case qPvalStart:
			if p.pos == len(p.buf) {
				p.finishCall(final)
				return
			}
			if p.buf[p.pos] == '\n' {
				p.pos++
			}
			p.valStart, p.emitted, p.scanFrom = p.pos, p.pos, p.pos
			p.st = qPval
		case qPval:
			if !p.value(final) {
				return
			}
			p.st = qBody
		case qAfterFn:
			if !p.skipWS() {
				p.afterCall = true
				return
			}
			m1 := p.match(hermesClose)
			if m1 == matched {
				p.afterCall = true
				p.st = qProse
				continue
			}
			m2 := p.match(qcFunc)
			if m2 == matched {
				p.region = p.pos - len(qcFunc)
				p.st = qFname
				continue
			}
			if (m1 == needMore || m2 == needMore) && !final {
				return
			}
			p.st = qRawAfter
		case qRawBefore, qRawAfter:
			after := p.st == qRawAfter
			if !p.rawUntil(hermesClose, !after, final) {
				return
			}
			p.afterCall = after
			p.st = qProse
		}
	}
}

// value scans the current parameter value; true when it ended.
func (p *qwen3Coder) value(final bool) bool {
	rest := p.buf[p.scanFrom:]
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
			p.endValue(len(p.buf))
			p.pos = len(p.buf)
			p.closeArgs()
			return false
		}
		safe := len(p.buf) - partialSuffix(p.buf[p.valStart:], qcParamEnd, qcParam, qcFuncEnd)
		if safe > p.valStart && p.buf[safe-1] == '\n' {
			safe--
		}
		if p.typ == "string" && safe > p.emitted {
			if needsEscape(p.buf[p.emitted:safe]) {
				p.tmp = escapeJSON(p.tmp[:0], p.buf[p.emitted:safe])
				p.addArgs(string(p.tmp))
			} else {
				p.addArgs(p.str(p.emitted, safe))
			}
			p.emitted = safe
		}
		p.pos = len(p.buf)
		if s := len(p.buf) - len(qcParamEnd) + 1; s > p.scanFrom {
			p.scanFrom = s
		}
		return false
	}
	stop := p.scanFrom + end
	if stop > p.valStart && p.buf[stop-1] == '\n' {
		stop--
	}
	p.endValue(stop)
	p.pos = p.scanFrom + next
	return true
}

// endValue writes the rest of the value buf[valStart:stop].
func (p *qwen3Coder) endValue(stop int) {
	if stop < p.emitted {
		stop = p.emitted
	}
	if p.typ == "string" {
		p.tmp = escapeJSON(p.tmp[:0], p.buf[p.emitted:stop])
		p.tmp = append(p.tmp, '"')
		p.addArgs(string(p.tmp))
		p.emitted = stop
		return
	}
	p.addArgs(typedValue(p.typ, string(p.buf[p.valStart:stop])))
}

// upTo reads up to c at the cursor and consumes it; false if c has not
// arrived.
func (p *qwen3Coder) upTo(c byte) (string, bool) {
	i := bytes.IndexByte(p.buf[p.pos:], c)
	if i < 0 {
		return "", false
	}
	s := strings.TrimSpace(string(p.buf[p.pos : p.pos+i]))
	p.pos += i + 1
	return s, true
}

// broken returns uncommitted malformed markup as content.
func (p *qwen3Coder) broken() {
	p.emitContent(p.region, p.pos)
	p.st = qRawBefore
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
