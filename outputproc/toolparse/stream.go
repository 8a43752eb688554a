package toolparse

import (
	"bytes"
	"encoding/json"

	"github.com/sluice-llm/sluice/outputproc/tagscan"
)

// commitAfter is how many bytes of a call's JSON arguments must scan as
// valid JSON before the call is committed: enough to catch the common
// malformations (single quotes, unquoted keys) while the call is still
// returnable as content, short enough not to delay streaming noticeably.
const commitAfter = 8

// toolSet is the request's tools by name, with parameter types resolved on
// first use (qwen3_coder).
type toolSet struct {
	schemas map[string]json.RawMessage
	types   map[string]map[string]string
}

func newToolSet(tools []Tool) toolSet {
	ts := toolSet{schemas: make(map[string]json.RawMessage, len(tools))}
	for _, t := range tools {
		ts.schemas[t.Name] = t.Parameters
	}
	return ts
}

// known reports whether name may be called: any name when no tools were
// given, else one of the tools.
func (ts *toolSet) known(name string) bool {
	if name == "" {
		return false
	}
	if len(ts.schemas) == 0 {
		return true
	}
	_, ok := ts.schemas[name]
	return ok
}

// paramType returns the JSON schema type of tool's parameter param
// ("string", "integer", "number", "boolean", "object", "array", "null"), or
// "" when the schema does not say.
func (ts *toolSet) paramType(tool, param string) string {
	if ts.types == nil {
		ts.types = make(map[string]map[string]string)
	}
	m, ok := ts.types[tool]
	if !ok {
		m = schemaTypes(ts.schemas[tool])
		ts.types[tool] = m
	}
	return m[param]
}

// schemaTypes maps each property of an object schema to its type.
func schemaTypes(schema json.RawMessage) map[string]string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return map[string]string{}
	}
	m := make(map[string]string, len(s.Properties))
	for k, v := range s.Properties {
		m[k] = typeOf(v, 0)
	}
	return m
}

// typeOf resolves a property schema's type: a string type, the first
// non-null entry of a type list, or the first typed anyOf/oneOf branch.
func typeOf(raw json.RawMessage, depth int) string {
	var p struct {
		Type  json.RawMessage   `json:"type"`
		AnyOf []json.RawMessage `json:"anyOf"`
		OneOf []json.RawMessage `json:"oneOf"`
		Enum  []any             `json:"enum"`
	}
	if depth > 4 || json.Unmarshal(raw, &p) != nil {
		return ""
	}
	var one string
	if json.Unmarshal(p.Type, &one) == nil {
		return one
	}
	var list []string
	if json.Unmarshal(p.Type, &list) == nil {
		for _, t := range list {
			if t != "null" {
				return t
			}
		}
		if len(list) > 0 {
			return list[0]
		}
	}
	for _, br := range append(p.AnyOf, p.OneOf...) {
		if t := typeOf(br, depth+1); t != "" && t != "null" {
			return t
		}
	}
	if len(p.Enum) > 0 {
		if _, ok := p.Enum[0].(string); ok {
			return "string"
		}
	}
	return ""
}

// base is the state every parser shares: the accumulated text, the cursor
// up to which it has been decided, and the delta under construction.
type base struct {
	buf     []byte // all text added so far
	pos     int    // buf[:pos] has been decided (sent or consumed as markup)
	last    string // the text of the latest Add, to slice content without copying
	lastOff int    // offset of last in buf
	out     Delta  // the delta being built

	idGen  func() string
	tools  toolSet
	ncalls int // calls begun so far

	region   int  // where the current uncommitted markup starts
	argsOpen bool // a built arguments object's '{' was sent, '}' not yet

	afterCall bool // at the start or right after a call: whitespace is held
	wsPend    bool // buf[wsStart:wsEnd] is whitespace after a call, not yet sent
	wsStart   int
	wsEnd     int
}

// Called reports whether any call was emitted.
func (b *base) Called() bool { return b.ncalls > 0 }

func (b *base) add(text string) {
	b.lastOff = len(b.buf)
	b.last = text
	b.buf = append(b.buf, text...)
}

// take returns the delta built so far and starts a new one. The
// ToolCalls backing array is reused by the next Add or Finish.
func (b *base) take() Delta {
	d := b.out
	b.out = Delta{ToolCalls: d.ToolCalls[:0]}
	if len(d.ToolCalls) == 0 {
		d.ToolCalls = nil
	}
	return d
}

// end finishes the output: whitespace still pending is dropped after a
// call and sent when there was none (so text without calls is returned
// unchanged), and the last delta is returned.
func (b *base) end() Delta {
	if b.ncalls == 0 {
		b.flushWS()
	}
	return b.take()
}

// str returns buf[a:e] as a string, without copying when the range lies in
// the latest Add's text.
func (b *base) str(a, e int) string {
	if a >= b.lastOff {
		return b.last[a-b.lastOff : e-b.lastOff]
	}
	return string(b.buf[a:e])
}

// emitContent sends buf[a:e] as content, preceded by any pending
// whitespace (which always ends at a).
func (b *base) emitContent(a, e int) {
	if a >= e {
		return
	}
	b.flushWS()
	b.addContent(b.str(a, e))
}

// flushWS sends pending whitespace as content.
func (b *base) flushWS() {
	if b.wsPend {
		b.wsPend = false
		b.addContent(b.str(b.wsStart, b.wsEnd))
	}
}

func (b *base) addContent(s string) {
	if b.out.Content == "" {
		b.out.Content = s
	} else {
		b.out.Content += s
	}
}

// emitHeld sends buf[pos:] as content except a tail that could still
// become one of tags (everything when final).
func (b *base) emitHeld(final bool, tags ...string) {
	end := len(b.buf)
	if !final {
		end -= tagscan.PartialSuffix(b.buf[b.pos:], tags...)
	}
	b.emitContent(b.pos, end)
	b.pos = end
}

// skipCallWS consumes whitespace that follows a call, keeping it pending:
// it is sent only if content follows. It returns false when the text ends
// before anything else.
func (b *base) skipCallWS() bool {
	if !b.afterCall {
		return true
	}
	start := b.pos
	for b.pos < len(b.buf) && tagscan.IsSpace(b.buf[b.pos]) {
		b.pos++
	}
	if b.pos > start {
		if !b.wsPend {
			b.wsPend, b.wsStart = true, start
		}
		b.wsEnd = b.pos
	}
	if b.pos == len(b.buf) {
		return false
	}
	b.afterCall = false
	return true
}

// beginCall starts call number ncalls named name.
func (b *base) beginCall(name string) {
	b.wsPend = false
	b.out.ToolCalls = append(b.out.ToolCalls, ToolCallDelta{Index: b.ncalls, ID: b.idGen(), Type: "function", Name: name})
	b.ncalls++
}

// addArgs appends s to the current call's arguments.
func (b *base) addArgs(s string) {
	if s == "" {
		return
	}
	idx := b.ncalls - 1
	if n := len(b.out.ToolCalls); n > 0 && b.out.ToolCalls[n-1].Index == idx {
		b.out.ToolCalls[n-1].Arguments += s
		return
	}
	b.out.ToolCalls = append(b.out.ToolCalls, ToolCallDelta{Index: idx, Arguments: s})
}

// skipWS advances over whitespace; false when the text ends first.
func (b *base) skipWS() bool {
	for b.pos < len(b.buf) && tagscan.IsSpace(b.buf[b.pos]) {
		b.pos++
	}
	return b.pos < len(b.buf)
}

// Results of match.
const (
	noMatch  = -1 // the text at the cursor is not tag
	needMore = 0  // the text at the cursor is a proper prefix of tag
	matched  = 1  // the cursor is at tag, now consumed
)

// match checks for tag at the cursor and consumes it when present.
func (b *base) match(tag string) int {
	rest := b.buf[b.pos:]
	if len(rest) >= len(tag) {
		if string(rest[:len(tag)]) == tag {
			b.pos += len(tag)
			return matched
		}
		return noMatch
	}
	if string(rest) == tag[:len(rest)] {
		return needMore
	}
	return noMatch
}

// rawUntil sends text as content up to end (and end itself when keepEnd),
// holding back a partial end. It reports whether end was reached (and
// consumed); with final, everything left is sent.
func (b *base) rawUntil(end string, keepEnd, final bool) bool {
	i := bytes.Index(b.buf[b.pos:], []byte(end))
	if i < 0 {
		b.emitHeld(final, end)
		return false
	}
	stop := b.pos + i
	if keepEnd {
		stop += len(end)
	}
	b.emitContent(b.pos, stop)
	b.pos += i + len(end)
	return true
}

// escapeJSON appends s to dst as the inside of a JSON string, escaping
// only what JSON requires (non-ASCII is kept as is, like json.dumps with
// ensure_ascii=False).
func escapeJSON(dst []byte, s []byte) []byte {
	const hexd = "0123456789abcdef"
	for _, c := range s {
		switch {
		case c == '"':
			dst = append(dst, '\\', '"')
		case c == '\\':
			dst = append(dst, '\\', '\\')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// needsEscape reports whether s has bytes a JSON string must escape.
func needsEscape(s []byte) bool {
	for _, c := range s {
		if c == '"' || c == '\\' || c < 0x20 {
			return true
		}
	}
	return false
}

// quoteJSON returns s as a JSON string literal.
func quoteJSON(s string) string {
	out := make([]byte, 0, len(s)+2)
	out = append(out, '"')
	out = escapeJSON(out, []byte(s))
	return string(append(out, '"'))
}
