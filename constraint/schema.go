package constraint

import (
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"sort"
	"strconv"
	"strings"
)

// Loop guards and lexeme shapes shared by every JSON grammar.
const (
	// jsonChar is one JSON string character: any code point but the
	// quote, backslash and controls, or an escape (\u escapes exclude
	// surrogates so that lengths count code points exactly).
	jsonChar = `(?:[^"\\\x00-\x1F\x7F]|\\(?:["\\/bfnrt]|u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F]|[dD][0-7][0-9a-fA-F][0-9a-fA-F])))`
	// intRE is an integer of at most 16 digits.
	intRE = `-?(?:0|[1-9][0-9]{0,15})`
	// numRE is a number: at most 16 integer digits, 15 fraction digits
	// and a 2-digit exponent (so every value fits a float64).
	numRE = `-?(?:0|[1-9][0-9]{0,15})(?:\.[0-9]{1,15})?(?:[eE][+-]?[0-9]{1,2})?`
	// maxIntDigits bounds integers; bounds are clamped to it.
	maxBound = 9999999999999999
	// maxRepeat is the largest length or item count we unroll.
	maxRepeat = 1000
)

// formats maps the supported JSON Schema "format" values to regexes of the
// string content (none needs JSON escaping). They are sound (every match is
// valid) rather than complete: date rejects February 29, time leap seconds.
var formats = map[string]string{
	"date":      dateRE,
	"time":      timeRE,
	"date-time": dateRE + `[Tt]` + timeRE,
	"uuid":      `[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`,
	"email":     `[a-zA-Z0-9_%+-]{1,32}(?:\.[a-zA-Z0-9_%+-]{1,16}){0,2}@` + hostRE,
	"hostname":  hostRE,
	"ipv4":      `(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])`,
}

const (
	dateRE = `[0-9]{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)`
	timeRE = `(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])`
	hostRE = `[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,20}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,20}[a-zA-Z0-9])?){1,3}`
)

// supportedKeywords are the JSON Schema keywords the compiler honours.
var supportedKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"enum": true, "const": true, "anyOf": true, "oneOf": true, "allOf": true, "$ref": true,
	"items": true, "nullable": true, "minLength": true, "maxLength": true, "pattern": true,
	"format": true, "minimum": true, "maximum": true, "exclusiveMinimum": true,
	"exclusiveMaximum": true, "minItems": true, "maxItems": true, "prefixItems": true,
}

// annotationKeywords do not constrain instances (or hold definitions
// reached through $ref) and are ignored.
var annotationKeywords = map[string]bool{
	"title": true, "description": true, "$schema": true, "$id": true, "$comment": true,
	"examples": true, "default": true, "deprecated": true, "readOnly": true,
	"writeOnly": true, "$defs": true, "definitions": true,
}

// UnsupportedError reports a JSON Schema keyword (or keyword value or
// combination) the compiler cannot honour exactly.
type UnsupportedError struct {
	Keyword string // the keyword, e.g. "uniqueItems"
	Pointer string // JSON pointer (URI fragment form) of the schema holding it
	Detail  string // optional explanation
}

// Error implements error.
func (e *UnsupportedError) Error() string {
	s := fmt.Sprintf("unsupported JSON Schema keyword %q at %s", e.Keyword, e.Pointer)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func unsupported(kw, ptr, detail string, args ...any) error {
	return &UnsupportedError{Keyword: kw, Pointer: "#" + ptr, Detail: fmt.Sprintf(detail, args...)}
}

// schemaCompiler lowers one schema document.
type schemaCompiler struct {
	b    *builder
	root *jv
	refs map[string]Symbol
	any  Symbol
	has  bool // any is built
	// depth guards against hostile nesting of non-$ref subschemas.
	depth int
	// ws is the whitespace regex where a line may break (after an opening
	// bracket or a comma, before a closing bracket), inline the one
	// around colons and before commas, rootWS the one before the root
	// value ("" for none).
	ws, inline, rootWS string
}

func newSchemaCompiler(root *jv, w Whitespace) *schemaCompiler {
	return &schemaCompiler{b: newBuilder(), root: root, refs: map[string]Symbol{}, ws: w.regex(), inline: w.inlineRegex(), rootWS: w.rootRegex()}
}

// setRoot makes the start rule the root value v, after the whitespace
// allowed before it.
func (c *schemaCompiler) setRoot(start int, v Symbol) {
	if c.rootWS == "" {
		c.b.g.Rules[start].Alts = [][]Symbol{{v}}
		return
	}
	c.b.g.Rules[start].Alts = [][]Symbol{{c.b.term(c.rootWS), v}}
}

func compileSchema(root *jv, w Whitespace) (*Grammar, error) {
	c := newSchemaCompiler(root, w)
	start := c.b.rule("root")
	c.b.g.Start = start
	v, err := c.schema(root, "")
	if err != nil {
		return nil, err
	}
	c.setRoot(start, v)
	return &c.b.g, nil
}

func compileJSONObject(w Whitespace) *Grammar {
	c := newSchemaCompiler(nil, w)
	start := c.b.rule("root")
	c.b.g.Start = start
	c.anyValue()
	c.setRoot(start, c.mapObject(c.any))
	return &c.b.g
}

// punctuation terminals: whitespace belongs to the separators so that
// adjacent terminals never race over the same spaces.
func (c *schemaCompiler) lbrace() Symbol   { return c.b.term(`\{` + c.ws) }
func (c *schemaCompiler) rbrace() Symbol   { return c.b.term(c.ws + `\}`) }
func (c *schemaCompiler) emptyObj() Symbol { return c.b.term(`\{` + c.ws + `\}`) }
func (c *schemaCompiler) lbrack() Symbol   { return c.b.term(`\[` + c.ws) }
func (c *schemaCompiler) rbrack() Symbol   { return c.b.term(c.ws + `\]`) }
func (c *schemaCompiler) emptyArr() Symbol { return c.b.term(`\[` + c.ws + `\]`) }
func (c *schemaCompiler) comma() Symbol    { return c.b.term(c.inline + `,` + c.ws) }
func (c *schemaCompiler) colon() Symbol    { return c.b.term(c.inline + `:` + c.inline) }
func (c *schemaCompiler) str() Symbol      { return c.b.term(`"` + jsonChar + `*"`) }

// anyValue builds (once) the rules for an arbitrary JSON value.
func (c *schemaCompiler) anyValue() Symbol {
	if c.has {
		return c.any
	}
	c.has = true
	r := c.b.rule("value")
	c.any = Ref(r)
	obj := c.mapObject(c.any)
	arr := c.listOf(c.any, 0, -1, nil, "array")
	c.b.g.Rules[r].Alts = [][]Symbol{{obj}, {arr}, {c.str()}, {c.b.term(numRE)}, {c.b.term(`true|false|null`)}}
	return c.any
}

// mapObject is an object with arbitrary keys whose values match val.
func (c *schemaCompiler) mapObject(val Symbol) Symbol {
	tail := c.b.rule("members")
	key := c.str()
	c.b.g.Rules[tail].Alts = [][]Symbol{{c.comma(), key, c.colon(), val, Ref(tail)}, nil}
	return c.b.define("object", seq(c.emptyObj()), seq(c.lbrace(), key, c.colon(), val, Ref(tail), c.rbrace()))
}

// listOf is an array whose element i matches prefix[i] (or item beyond
// the prefix; item < 0 with ok=false means no more items), with between
// min and max elements (max < 0: unbounded).
func (c *schemaCompiler) listOf(item Symbol, min, max int, prefix []Symbol, name string) Symbol {
	const noItem = Symbol(math.MinInt32)
	elem := func(i int) Symbol {
		if i < len(prefix) {
			return prefix[i]
		}
		return item
	}
	// tail(i): the rest of the array after i elements.
	var loop Symbol = noItem
	tails := map[int]Symbol{}
	var tail func(i int) []Symbol
	tail = func(i int) []Symbol {
		if max >= 0 && i >= max || i >= len(prefix) && item == noItem {
			return nil
		}
		if s, ok := tails[i]; ok {
			return []Symbol{s}
		}
		if max < 0 && i >= len(prefix) && i >= min {
			if loop == noItem {
				r := c.b.rule(name + "_more")
				loop = Ref(r)
				c.b.g.Rules[r].Alts = [][]Symbol{{c.comma(), item, loop}, nil}
			}
			return []Symbol{loop}
		}
		r := c.b.rule(fmt.Sprintf("%s_%d", name, i))
		tails[i] = Ref(r)
		alt := append([]Symbol{c.comma(), elem(i)}, tail(i+1)...)
		c.b.g.Rules[r].Alts = [][]Symbol{alt}
		if i >= min {
			c.b.g.Rules[r].Alts = append(c.b.g.Rules[r].Alts, nil)
		}
		return []Symbol{Ref(r)}
	}
	var alts [][]Symbol
	if min == 0 {
		alts = append(alts, seq(c.emptyArr()))
	}
	if max != 0 && (len(prefix) > 0 || item != noItem) {
		alt := append([]Symbol{c.lbrack(), elem(0)}, tail(1)...)
		alts = append(alts, append(alt, c.rbrack()))
	}
	return c.b.define(name, alts...)
}

func escPointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// constraintKeys lists the non-annotation keywords of s except skip.
func constraintKeys(s *jv, skip ...string) []string {
	var out []string
outer:
	for _, k := range s.keys {
		if annotationKeywords[k] {
			continue
		}
		for _, sk := range skip {
			if k == sk {
				continue outer
			}
		}
		out = append(out, k)
	}
	return out
}

func (c *schemaCompiler) schema(s *jv, ptr string) (Symbol, error) {
	c.depth++
	defer func() { c.depth-- }()
	if c.depth > maxJSONDepth {
		return 0, fmt.Errorf("json_schema: nested deeper than %d at #%s", maxJSONDepth, ptr)
	}
	switch s.kind {
	case jBool:
		if s.b {
			return c.anyValue(), nil
		}
		return 0, fmt.Errorf("json_schema: schema false at #%s matches nothing", ptr)
	case jObj:
	default:
		return 0, fmt.Errorf("json_schema: schema at #%s is not an object or boolean", ptr)
	}
	for _, k := range s.keys {
		if !supportedKeywords[k] && !annotationKeywords[k] {
			return 0, unsupported(k, ptr, "")
		}
	}
	if ref := s.get("$ref"); ref != nil {
		if extra := constraintKeys(s, "$ref"); len(extra) > 0 {
			return 0, unsupported(extra[0], ptr, "beside $ref")
		}
		if ref.kind != jStr {
			return 0, fmt.Errorf("json_schema: $ref at #%s is not a string", ptr)
		}
		return c.ref(ref.str, ptr)
	}
	if all := s.get("allOf"); all != nil {
		if all.kind != jArr || len(all.arr) != 1 {
			return 0, unsupported("allOf", ptr, "only a single-element allOf is supported")
		}
		if extra := constraintKeys(s, "allOf"); len(extra) > 0 {
			return 0, unsupported(extra[0], ptr, "beside allOf")
		}
		return c.schema(all.arr[0], ptr+"/allOf/0")
	}
	if cv := s.get("const"); cv != nil {
		return c.b.lit(jsonText(cv)), nil
	}
	if ev := s.get("enum"); ev != nil {
		if ev.kind != jArr || len(ev.arr) == 0 {
			return 0, fmt.Errorf("json_schema: enum at #%s must be a non-empty array", ptr)
		}
		var alts [][]Symbol
		seen := map[string]bool{}
		for _, e := range ev.arr {
			t := jsonText(e)
			if !seen[t] {
				seen[t] = true
				alts = append(alts, seq(c.b.lit(t)))
			}
		}
		return c.b.define("enum", alts...), nil
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		av := s.get(kw)
		if av == nil {
			continue
		}
		if extra := constraintKeys(s, kw, "nullable"); len(extra) > 0 {
			return 0, unsupported(extra[0], ptr, "beside %s", kw)
		}
		if av.kind != jArr || len(av.arr) == 0 {
			return 0, fmt.Errorf("json_schema: %s at #%s must be a non-empty array", kw, ptr)
		}
		var alts [][]Symbol
		for i, sub := range av.arr {
			sym, err := c.schema(sub, fmt.Sprintf("%s/%s/%d", ptr, kw, i))
			if err != nil {
				return 0, err
			}
			alts = append(alts, seq(sym))
		}
		if n := s.get("nullable"); n != nil && n.kind == jBool && n.b {
			alts = append(alts, seq(c.b.lit("null")))
		}
		return c.b.define(kw, alts...), nil
	}
	types, err := schemaTypes(s, ptr)
	if err != nil {
		return 0, err
	}
	if types == nil {
		return c.anyValue(), nil
	}
	var alts [][]Symbol
	for _, t := range types {
		var sym Symbol
		var err error
		switch t {
		case "string":
			sym, err = c.stringSchema(s, ptr)
		case "integer":
			sym, err = c.numberSchema(s, ptr, true)
		case "number":
			sym, err = c.numberSchema(s, ptr, false)
		case "boolean":
			sym = c.b.term(`true|false`)
		case "null":
			sym = c.b.lit("null")
		case "object":
			sym, err = c.objectSchema(s, ptr)
		case "array":
			sym, err = c.arraySchema(s, ptr)
		default:
			return 0, fmt.Errorf("json_schema: unknown type %q at #%s", t, ptr)
		}
		if err != nil {
			return 0, err
		}
		alts = append(alts, seq(sym))
	}
	if len(alts) == 1 {
		return alts[0][0], nil
	}
	return c.b.define("types", alts...), nil
}

// schemaTypes returns the types s allows (nil: any value), from "type" or
// inferred from the keywords present, plus "null" when nullable.
func schemaTypes(s *jv, ptr string) ([]string, error) {
	var types []string
	if t := s.get("type"); t != nil {
		switch t.kind {
		case jStr:
			types = []string{t.str}
		case jArr:
			for _, e := range t.arr {
				if e.kind != jStr {
					return nil, fmt.Errorf("json_schema: type at #%s: not a string", ptr)
				}
				types = append(types, e.str)
			}
			if len(types) == 0 {
				return nil, fmt.Errorf("json_schema: type at #%s: empty array", ptr)
			}
		default:
			return nil, fmt.Errorf("json_schema: type at #%s: not a string or array", ptr)
		}
	} else {
		infer := map[string]string{
			"properties": "object", "required": "object", "additionalProperties": "object",
			"items": "array", "prefixItems": "array", "minItems": "array", "maxItems": "array",
			"minLength": "string", "maxLength": "string", "pattern": "string", "format": "string",
			"minimum": "number", "maximum": "number", "exclusiveMinimum": "number", "exclusiveMaximum": "number",
		}
		seen := map[string]bool{}
		for _, k := range s.keys {
			if t, ok := infer[k]; ok && !seen[t] {
				seen[t] = true
				types = append(types, t)
			}
		}
		if len(types) == 0 {
			if n := s.get("nullable"); n != nil && n.kind == jBool && n.b {
				return []string{"null"}, nil
			}
			return nil, nil
		}
	}
	if n := s.get("nullable"); n != nil && n.kind == jBool && n.b {
		has := false
		for _, t := range types {
			has = has || t == "null"
		}
		if !has {
			types = append(types, "null")
		}
	}
	return types, nil
}

func (c *schemaCompiler) ref(ref, ptr string) (Symbol, error) {
	if sym, ok := c.refs[ref]; ok {
		return sym, nil
	}
	if !strings.HasPrefix(ref, "#") {
		return 0, unsupported("$ref", ptr, "only local references (#/...) are supported, got %q", ref)
	}
	target := c.root
	if p := ref[1:]; p != "" {
		if !strings.HasPrefix(p, "/") {
			return 0, unsupported("$ref", ptr, "anchors are not supported, got %q", ref)
		}
		for _, part := range strings.Split(p[1:], "/") {
			part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
			switch target.kind {
			case jObj:
				target = target.get(part)
			case jArr:
				i, err := strconv.Atoi(part)
				if err != nil || i < 0 || i >= len(target.arr) {
					target = nil
				} else {
					target = target.arr[i]
				}
			default:
				target = nil
			}
			if target == nil {
				return 0, fmt.Errorf("json_schema: $ref %q at #%s does not resolve", ref, ptr)
			}
		}
	}
	r := c.b.rule("ref")
	c.refs[ref] = Ref(r)
	sym, err := c.schema(target, ref[1:])
	if err != nil {
		return 0, err
	}
	c.b.g.Rules[r].Alts = [][]Symbol{{sym}}
	return Ref(r), nil
}

// intKeyword reads a non-negative integer keyword (-1 when absent).
func intKeyword(s *jv, kw, ptr string) (int, error) {
	v := s.get(kw)
	if v == nil {
		return -1, nil
	}
	if v.kind != jNum {
		return 0, fmt.Errorf("json_schema: %s at #%s is not a number", kw, ptr)
	}
	f, err := v.num.Float64()
	if err != nil || f < 0 || f != math.Trunc(f) {
		return 0, fmt.Errorf("json_schema: %s at #%s must be a non-negative integer", kw, ptr)
	}
	if f > maxRepeat {
		return 0, unsupported(kw, ptr, "values above %d are not supported", maxRepeat)
	}
	return int(f), nil
}

func (c *schemaCompiler) stringSchema(s *jv, ptr string) (Symbol, error) {
	minL, err := intKeyword(s, "minLength", ptr)
	if err != nil {
		return 0, err
	}
	maxL, err := intKeyword(s, "maxLength", ptr)
	if err != nil {
		return 0, err
	}
	pat, fmtv := s.get("pattern"), s.get("format")
	hasLen := minL >= 0 || maxL >= 0
	switch {
	case pat != nil && (fmtv != nil || hasLen):
		return 0, unsupported("pattern", ptr, "pattern combined with format/minLength/maxLength")
	case fmtv != nil && hasLen:
		return 0, unsupported("format", ptr, "format combined with minLength/maxLength")
	case pat != nil:
		if pat.kind != jStr {
			return 0, fmt.Errorf("json_schema: pattern at #%s is not a string", ptr)
		}
		re, err := jsonStringPattern(pat.str)
		if err != nil {
			return 0, unsupported("pattern", ptr, "%v", err)
		}
		return c.b.term(`"` + re + `"`), nil
	case fmtv != nil:
		if fmtv.kind != jStr {
			return 0, fmt.Errorf("json_schema: format at #%s is not a string", ptr)
		}
		re, ok := formats[fmtv.str]
		if !ok {
			return 0, unsupported("format", ptr, "format %q is not supported", fmtv.str)
		}
		return c.b.term(`"` + re + `"`), nil
	case hasLen:
		if minL < 0 {
			minL = 0
		}
		if maxL >= 0 && maxL < minL {
			return 0, fmt.Errorf("json_schema: maxLength < minLength at #%s", ptr)
		}
		rep := fmt.Sprintf("{%d,}", minL)
		if maxL >= 0 {
			rep = fmt.Sprintf("{%d,%d}", minL, maxL)
		}
		return c.b.term(`"` + jsonChar + rep + `"`), nil
	}
	return c.str(), nil
}

// numBound reads a numeric keyword.
func numBound(s *jv, kw, ptr string) (float64, bool, error) {
	v := s.get(kw)
	if v == nil {
		return 0, false, nil
	}
	if v.kind != jNum {
		return 0, false, fmt.Errorf("json_schema: %s at #%s is not a number", kw, ptr)
	}
	f, err := v.num.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false, fmt.Errorf("json_schema: %s at #%s: bad number", kw, ptr)
	}
	return f, true, nil
}

func (c *schemaCompiler) numberSchema(s *jv, ptr string, integer bool) (Symbol, error) {
	lo, hi := float64(-maxBound), float64(maxBound)
	loEx, hiEx := false, false
	bounded := false
	for _, kw := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		f, ok, err := numBound(s, kw, ptr)
		if err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		bounded = true
		if math.Abs(f) > maxBound {
			return 0, unsupported(kw, ptr, "bounds beyond ±%d are not supported", int64(maxBound))
		}
		if !integer && f != math.Trunc(f) {
			return 0, unsupported(kw, ptr, "non-integral bounds on numbers are not supported")
		}
		if integer {
			switch kw {
			case "minimum":
				lo = math.Max(lo, math.Ceil(f))
			case "maximum":
				hi = math.Min(hi, math.Floor(f))
			case "exclusiveMinimum":
				lo = math.Max(lo, math.Floor(f)+1)
			case "exclusiveMaximum":
				hi = math.Min(hi, math.Ceil(f)-1)
			}
			continue
		}
		switch kw {
		case "minimum":
			if f > lo || f == lo && loEx {
				lo, loEx = f, false
			}
		case "maximum":
			if f < hi || f == hi && hiEx {
				hi, hiEx = f, false
			}
		case "exclusiveMinimum":
			if f >= lo {
				lo, loEx = f, true
			}
		case "exclusiveMaximum":
			if f <= hi {
				hi, hiEx = f, true
			}
		}
	}
	if !bounded {
		if integer {
			return c.b.term(intRE), nil
		}
		return c.b.term(numRE), nil
	}
	if lo > hi || lo == hi && (loEx || hiEx) {
		return 0, fmt.Errorf("json_schema: empty numeric range at #%s", ptr)
	}
	if integer {
		return c.b.term(intRange(int64(lo), int64(hi))), nil
	}
	return c.b.term(numRange(int64(lo), loEx, int64(hi), hiEx)), nil
}

// intRange is a regex for the decimal integers in [lo, hi].
func intRange(lo, hi int64) string {
	var parts []string
	if lo < 0 {
		nh := min(hi, -1)
		parts = append(parts, "-(?:"+posRange(uint64(-nh), uint64(-lo))+")")
	}
	if hi >= 0 {
		parts = append(parts, posRange(uint64(max(lo, 0)), uint64(hi)))
	}
	return "(?:" + strings.Join(parts, "|") + ")"
}

// numRange is a regex for decimal numbers (no exponent, at most 15
// fraction digits) in the interval from lo to hi, each end inclusive or
// exclusive (loEx, hiEx); ±maxBound stands for unbounded.
func numRange(lo int64, loEx bool, hi int64, hiEx bool) string {
	var parts []string
	// Non-negative values: the interval clipped to [0, hi].
	if hi > 0 || hi == 0 && !hiEx {
		l, lEx := lo, loEx
		if lo < 0 {
			l, lEx = 0, false
		}
		if p := unsignedRange(uint64(l), lEx, uint64(hi), hiEx, hi >= maxBound); p != "" {
			parts = append(parts, p)
		}
	}
	// Negative values x = -y: y in (0 or -hi, -lo].
	if lo < 0 {
		l, lEx := uint64(0), true
		if hi < 0 {
			l, lEx = uint64(-hi), hiEx
		}
		if p := unsignedRange(l, lEx, uint64(-lo), loEx, lo <= -maxBound); p != "" {
			parts = append(parts, "-(?:"+p+")")
		}
	}
	return "(?:" + strings.Join(parts, "|") + ")"
}

// unsignedRange is a regex for non-negative decimals y = k.f with
// l <(=) y <(=) u (open means no upper bound).
func unsignedRange(l uint64, lEx bool, u uint64, uEx bool, open bool) string {
	const frac, zfrac, nzfrac = `(?:\.[0-9]{1,15})?`, `(?:\.0{1,15})?`, `\.[0-9]{0,14}[1-9]`
	if !open && l == u {
		if lEx || uEx {
			return ""
		}
		return strconv.FormatUint(l, 10) + zfrac
	}
	var parts []string
	// k = l: any fraction when inclusive, a non-zero one when exclusive.
	if lEx {
		parts = append(parts, strconv.FormatUint(l, 10)+nzfrac)
	} else {
		parts = append(parts, strconv.FormatUint(l, 10)+frac)
	}
	// l < k < u: any fraction.
	if open {
		parts = append(parts, "(?:"+posRange(l+1, maxBound)+")"+frac)
	} else if l+1 <= u-1 {
		parts = append(parts, "(?:"+posRange(l+1, u-1)+")"+frac)
	}
	// k = u: only u itself when inclusive.
	if !open && !uEx {
		parts = append(parts, strconv.FormatUint(u, 10)+zfrac)
	}
	return strings.Join(parts, "|")
}

func pow10(d int) uint64 {
	p := uint64(1)
	for range d {
		p *= 10
	}
	return p
}

// posRange is a regex for the decimal naturals in [a, b] without leading
// zeros.
func posRange(a, b uint64) string {
	da, db := len(strconv.FormatUint(a, 10)), len(strconv.FormatUint(b, 10))
	var parts []string
	for d := da; d <= db; d++ {
		lo := a
		if d > 1 {
			lo = max(a, pow10(d-1))
		}
		hi := min(b, pow10(d)-1)
		if lo > hi {
			continue
		}
		parts = append(parts, sameLen(strconv.FormatUint(lo, 10), strconv.FormatUint(hi, 10)))
	}
	return strings.Join(parts, "|")
}

func charRange(a, b byte) string {
	if a == b {
		return string(a)
	}
	return fmt.Sprintf("[%c-%c]", a, b)
}

// sameLen is a regex for the decimal strings of len(lo) digits in
// [lo, hi] (lexicographic = numeric order at equal length).
func sameLen(lo, hi string) string {
	if lo == hi {
		return lo
	}
	n := len(lo)
	if n == 1 {
		return charRange(lo[0], hi[0])
	}
	if strings.Trim(lo[1:], "0") == "" && strings.Trim(hi[1:], "9") == "" {
		return charRange(lo[0], hi[0]) + fmt.Sprintf("[0-9]{%d}", n-1)
	}
	if lo[0] == hi[0] {
		return lo[:1] + "(?:" + sameLen(lo[1:], hi[1:]) + ")"
	}
	parts := []string{lo[:1] + "(?:" + sameLen(lo[1:], strings.Repeat("9", n-1)) + ")"}
	if lo[0]+1 <= hi[0]-1 {
		parts = append(parts, charRange(lo[0]+1, hi[0]-1)+fmt.Sprintf("[0-9]{%d}", n-1))
	}
	parts = append(parts, hi[:1]+"(?:"+sameLen(strings.Repeat("0", n-1), hi[1:])+")")
	return "(?:" + strings.Join(parts, "|") + ")"
}

func (c *schemaCompiler) objectSchema(s *jv, ptr string) (Symbol, error) {
	props := s.get("properties")
	if props != nil && props.kind != jObj {
		return 0, fmt.Errorf("json_schema: properties at #%s is not an object", ptr)
	}
	required := map[string]bool{}
	if r := s.get("required"); r != nil {
		if r.kind != jArr {
			return 0, fmt.Errorf("json_schema: required at #%s is not an array", ptr)
		}
		for _, e := range r.arr {
			if e.kind != jStr {
				return 0, fmt.Errorf("json_schema: required at #%s: not a string", ptr)
			}
			required[e.str] = true
		}
	}
	var names []string
	if props != nil {
		names = props.keys
	}
	known := map[string]bool{}
	for _, n := range names {
		known[n] = true
	}
	var missing []string
	for r := range required {
		if !known[r] {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return 0, unsupported("required", ptr, "required property %q is not in properties", missing[0])
	}
	ap := s.get("additionalProperties")
	apAllows := ap != nil && !(ap.kind == jBool && !ap.b)
	if len(names) == 0 {
		switch {
		case ap == nil:
			return c.mapObject(c.anyValue()), nil
		case !apAllows:
			return c.emptyObj(), nil
		default:
			val, err := c.schema(ap, ptr+"/additionalProperties")
			if err != nil {
				return 0, err
			}
			return c.mapObject(val), nil
		}
	}
	n := len(names)
	kv := make([][]Symbol, n)
	for i, name := range names {
		val, err := c.schema(props.vals[i], ptr+"/properties/"+escPointer(name))
		if err != nil {
			return 0, err
		}
		kv[i] = []Symbol{c.b.lit(jsonText(&jv{kind: jStr, str: name})), c.colon(), val}
	}
	// after[i]: the members from i on, at least one already written.
	// first[i]: at least one member from i on, none written yet.
	// Additional properties (when allowed) come after the declared ones,
	// with keys that cannot collide with them.
	after := make([][]Symbol, n+1)
	first := make([]Symbol, n+1)
	hasFirstN := false
	if apAllows {
		val, err := c.schema(ap, ptr+"/additionalProperties")
		if err != nil {
			return 0, err
		}
		key := c.b.term(`"` + notInSet(names) + `"`)
		x := c.b.rule("extra")
		c.b.g.Rules[x].Alts = [][]Symbol{{c.comma(), key, c.colon(), val, Ref(x)}, nil}
		after[n] = []Symbol{Ref(x)}
		first[n] = c.b.define("extra_first", seq(key, c.colon(), val, Ref(x)))
		hasFirstN = true
	}
	for i := n - 1; i >= 0; i-- {
		alt := append(append([]Symbol{c.comma()}, kv[i]...), after[i+1]...)
		alts := [][]Symbol{alt}
		if !required[names[i]] {
			alts = append(alts, after[i+1])
		}
		after[i] = []Symbol{c.b.define("props_after", alts...)}
	}
	for i := n - 1; i >= 0; i-- {
		alts := [][]Symbol{append(append([]Symbol{}, kv[i]...), after[i+1]...)}
		if !required[names[i]] && (i+1 < n || hasFirstN) {
			alts = append(alts, seq(first[i+1]))
		}
		first[i] = c.b.define("props", alts...)
	}
	alts := [][]Symbol{seq(c.lbrace(), first[0], c.rbrace())}
	if len(required) == 0 {
		alts = append(alts, seq(c.emptyObj()))
	}
	return c.b.define("object", alts...), nil
}

// plainChar is the class of characters a JSON string holds unescaped.
var plainChar = []rune{0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7E, 0x80, 0x10FFFF}

// notInSet is a regex over unescaped JSON string content matching every
// string except the given ones (keys of additional properties, which must
// not repeat a declared property). It follows the trie of the names: stop
// where no name ends, leave the trie with a character no name continues
// with, or follow a name.
func notInSet(names []string) string {
	type node struct {
		end  bool
		next map[rune]*node
	}
	root := &node{next: map[rune]*node{}}
	for _, n := range names {
		cur := root
		for _, r := range n {
			nx := cur.next[r]
			if nx == nil {
				nx = &node{next: map[rune]*node{}}
				cur.next[r] = nx
			}
			cur = nx
		}
		cur.end = true
	}
	any := classRE(plainChar)
	var rec func(n *node) string
	rec = func(n *node) string {
		var alts []string
		if !n.end {
			alts = append(alts, "")
		}
		keys := make([]rune, 0, len(n.next))
		for r := range n.next {
			keys = append(keys, r)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		rest := plainChar
		for _, r := range keys {
			rest = subtractRune(rest, r)
			alts = append(alts, regexp.QuoteMeta(string(r))+"(?:"+rec(n.next[r])+")")
		}
		if len(rest) > 0 {
			alts = append(alts, classRE(rest)+any+"*")
		}
		return strings.Join(alts, "|")
	}
	return "(?:" + rec(root) + ")"
}

// classRE renders rune ranges as a character class.
func classRE(ranges []rune) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i := 0; i+1 < len(ranges); i += 2 {
		fmt.Fprintf(&sb, `\x{%x}-\x{%x}`, ranges[i], ranges[i+1])
	}
	sb.WriteByte(']')
	return sb.String()
}

// subtractRune removes r from sorted rune ranges.
func subtractRune(ranges []rune, r rune) []rune {
	var out []rune
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		if r < lo || r > hi {
			out = append(out, lo, hi)
			continue
		}
		if lo < r {
			out = append(out, lo, r-1)
		}
		if r < hi {
			out = append(out, r+1, hi)
		}
	}
	return out
}

func (c *schemaCompiler) arraySchema(s *jv, ptr string) (Symbol, error) {
	minI, err := intKeyword(s, "minItems", ptr)
	if err != nil {
		return 0, err
	}
	maxI, err := intKeyword(s, "maxItems", ptr)
	if err != nil {
		return 0, err
	}
	minI = max(minI, 0)
	var prefix []Symbol
	if p := s.get("prefixItems"); p != nil {
		if p.kind != jArr {
			return 0, fmt.Errorf("json_schema: prefixItems at #%s is not an array", ptr)
		}
		for i, sub := range p.arr {
			sym, err := c.schema(sub, fmt.Sprintf("%s/prefixItems/%d", ptr, i))
			if err != nil {
				return 0, err
			}
			prefix = append(prefix, sym)
		}
	}
	item := Symbol(math.MinInt32)
	if it := s.get("items"); it == nil {
		item = c.anyValue()
	} else if !(it.kind == jBool && !it.b) {
		if item, err = c.schema(it, ptr+"/items"); err != nil {
			return 0, err
		}
	} else if maxI < 0 || maxI > len(prefix) {
		maxI = len(prefix)
	}
	if maxI >= 0 && maxI < minI {
		return 0, fmt.Errorf("json_schema: maxItems < minItems at #%s", ptr)
	}
	if item == Symbol(math.MinInt32) && minI > len(prefix) {
		return 0, fmt.Errorf("json_schema: minItems exceeds prefixItems with items false at #%s", ptr)
	}
	return c.listOf(item, minI, maxI, prefix, "array"), nil
}

// anchoredPattern parses an RE2 pattern and returns one that must match a
// whole string: edge anchors are removed; with search (JSON Schema pattern
// semantics) an unanchored side gets "any characters".
func anchoredPattern(p string, search bool) (string, error) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return "", fmt.Errorf("pattern %q: %w", p, err)
	}
	re, err = stripAnchors(re, search)
	if err != nil {
		return "", fmt.Errorf("pattern %q: %w", p, err)
	}
	return re.String(), nil
}

func isBegin(r *syntax.Regexp) bool { return r.Op == syntax.OpBeginText || r.Op == syntax.OpBeginLine }
func isEnd(r *syntax.Regexp) bool   { return r.Op == syntax.OpEndText || r.Op == syntax.OpEndLine }

func stripAnchors(re *syntax.Regexp, search bool) (*syntax.Regexp, error) {
	if re.Op == syntax.OpAlternate {
		out := &syntax.Regexp{Op: syntax.OpAlternate, Flags: re.Flags}
		for _, s := range re.Sub {
			t, err := stripAnchors(s, search)
			if err != nil {
				return nil, err
			}
			out.Sub = append(out.Sub, t)
		}
		return out, nil
	}
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		subs = append([]*syntax.Regexp{}, re.Sub...)
	}
	begin := len(subs) > 0 && isBegin(subs[0])
	if begin {
		subs = subs[1:]
	}
	end := len(subs) > 0 && isEnd(subs[len(subs)-1])
	if end {
		subs = subs[:len(subs)-1]
	}
	for _, s := range subs {
		if op := emptyWidthOp(s); op != "" {
			return nil, fmt.Errorf("unsupported %s", op)
		}
	}
	anyStar := func() *syntax.Regexp {
		return &syntax.Regexp{Op: syntax.OpStar, Sub: []*syntax.Regexp{{Op: syntax.OpAnyChar}}}
	}
	if search && !begin {
		subs = append([]*syntax.Regexp{anyStar()}, subs...)
	}
	if search && !end {
		subs = append(subs, anyStar())
	}
	switch len(subs) {
	case 0:
		return &syntax.Regexp{Op: syntax.OpEmptyMatch}, nil
	case 1:
		return subs[0], nil
	}
	return &syntax.Regexp{Op: syntax.OpConcat, Sub: subs}, nil
}

// jsonStringPattern turns a JSON Schema pattern (applied to the decoded
// string, search semantics) into a regex over the JSON-encoded content:
// characters JSON must escape are matched in their escaped forms.
func jsonStringPattern(p string) (string, error) {
	s, err := anchoredPattern(p, true)
	if err != nil {
		return "", err
	}
	re, err := syntax.Parse(s, syntax.Perl)
	if err != nil {
		return "", err
	}
	return jsonEscapeRE(re).String(), nil
}

// jsonEscapes returns the JSON escapes of a rune that must be escaped, or
// nil when the rune may appear literally.
func jsonEscapes(r rune) []string {
	switch r {
	case '"':
		return []string{`\"`}
	case '\\':
		return []string{`\\`}
	case '\b':
		return []string{`\b`}
	case '\f':
		return []string{`\f`}
	case '\n':
		return []string{`\n`}
	case '\r':
		return []string{`\r`}
	case '\t':
		return []string{`\t`}
	}
	if r < 0x20 || r == 0x7F {
		return []string{fmt.Sprintf(`\u%04x`, r)}
	}
	return nil
}

// specialRanges are the runes JSON strings cannot hold literally.
var specialRanges = []rune{0x00, 0x1F, '"', '"', '\\', '\\', 0x7F, 0x7F}

func literalAlt(strs []string) *syntax.Regexp {
	alt := &syntax.Regexp{Op: syntax.OpAlternate}
	for _, s := range strs {
		alt.Sub = append(alt.Sub, &syntax.Regexp{Op: syntax.OpLiteral, Rune: []rune(s)})
	}
	if len(alt.Sub) == 1 {
		return alt.Sub[0]
	}
	return alt
}

func jsonEscapeRE(re *syntax.Regexp) *syntax.Regexp {
	switch re.Op {
	case syntax.OpLiteral:
		cat := &syntax.Regexp{Op: syntax.OpConcat}
		var run []rune
		flush := func() {
			if len(run) > 0 {
				cat.Sub = append(cat.Sub, &syntax.Regexp{Op: syntax.OpLiteral, Rune: run, Flags: re.Flags})
				run = nil
			}
		}
		for _, r := range re.Rune {
			if esc := jsonEscapes(r); esc != nil {
				flush()
				cat.Sub = append(cat.Sub, literalAlt(esc))
			} else {
				run = append(run, r)
			}
		}
		flush()
		if len(cat.Sub) == 1 {
			return cat.Sub[0]
		}
		return cat
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL, syntax.OpCharClass:
		ranges := re.Rune
		switch re.Op {
		case syntax.OpAnyChar:
			ranges = []rune{0, 0x10FFFF}
		case syntax.OpAnyCharNotNL:
			ranges = []rune{0, '\n' - 1, '\n' + 1, 0x10FFFF}
		}
		plain, escs := splitClass(ranges)
		alt := &syntax.Regexp{Op: syntax.OpAlternate}
		if len(plain) > 0 {
			alt.Sub = append(alt.Sub, &syntax.Regexp{Op: syntax.OpCharClass, Rune: plain})
		}
		if len(escs) > 0 {
			alt.Sub = append(alt.Sub, literalAlt(escs))
		}
		switch len(alt.Sub) {
		case 0:
			return &syntax.Regexp{Op: syntax.OpNoMatch}
		case 1:
			return alt.Sub[0]
		}
		return alt
	}
	out := *re
	out.Sub = nil
	for _, s := range re.Sub {
		out.Sub = append(out.Sub, jsonEscapeRE(s))
	}
	return &out
}

// splitClass splits rune ranges into the literal-safe ranges and the
// escapes of the special runes they contain.
func splitClass(ranges []rune) (plain []rune, escs []string) {
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		for lo <= hi {
			// find the first special range intersecting [lo, hi]
			cut := false
			for j := 0; j+1 < len(specialRanges); j += 2 {
				slo, shi := specialRanges[j], specialRanges[j+1]
				if shi < lo || slo > hi {
					continue
				}
				if lo < slo {
					plain = append(plain, lo, slo-1)
				}
				for r := max(lo, slo); r <= min(hi, shi); r++ {
					escs = append(escs, jsonEscapes(r)...)
				}
				lo = shi + 1
				cut = true
				break
			}
			if !cut {
				plain = append(plain, lo, hi)
				break
			}
		}
	}
	return plain, escs
}
