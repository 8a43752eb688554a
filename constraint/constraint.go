// Package constraint turns a request's structured-output constraint
// (response_format json_schema / json_object, vLLM-style regex, choice and
// grammar) into its canonical form, validates it, and lowers it to the
// grammar IR that the engine's guide package matches token by token.
//
// The frontend calls the constructors (JSONSchema, JSONObject, Regex,
// Choice, GBNF): each validates the constraint fully, by compiling it,
// and returns an ipc.Constraint whose Spec is canonical (equal schemas give
// equal Specs) and whose Hash keys the engine's compiled-grammar cache. A
// constraint that cannot be honoured exactly is an error naming the cause
// (for JSON Schema: `unsupported JSON Schema keyword "X" at /json/pointer`);
// nothing is ever silently dropped. The engine calls Compile on the
// ipc.Constraint it receives.
//
// Loop guards built into every JSON grammar: bounded whitespace (see
// Whitespace: by default, as llama.cpp's grammar, none before the root
// value and between tokens nothing, a space, or a newline and at most 20
// spaces or tabs; vLLM's compact form and Sluice's earlier looser form on
// request), integers and fractions of at most 16 and 15 digits, exponents
// of at most 2 digits, and nothing after the top-level value: the engine
// allows only EOS there. Whitespace is the same in strict and non-strict
// mode (we always constrain; strict only changes nothing in the grammar
// today and is kept in the request for the record).
//
// JSON Schema support. Tier 1: type (also arrays of types), properties
// (generated in definition order), required, additionalProperties (absent
// means false, as in OpenAI strict mode and llama.cpp; true or a schema
// allows extra members after the declared ones, with unescaped keys that
// differ from every declared name), enum, const, anyOf, oneOf (treated as
// anyOf: branches should be disjoint), single-element allOf, local $ref
// (#/$defs/…, #/definitions/…, #, any local pointer; recursion allowed),
// items, nullable. Tier 2: minLength/maxLength (≤ 1000), pattern (RE2
// syntax, search semantics as in JSON Schema, over the decoded string),
// format (date, time, date-time, uuid, email, hostname, ipv4),
// minimum/maximum/exclusive* (integers: exact digit-range regexes; numbers:
// inclusive integral bounds), minItems/maxItems (≤ 1000), prefixItems.
// A schema without "type" gets the types its keywords imply. Annotations
// (title, description, $schema, $id, $comment, examples, default,
// deprecated, readOnly, writeOnly) are ignored. Anything else, or a
// combination we cannot intersect (pattern with format or length bounds),
// is an *UnsupportedError.
//
// The package imports nothing from engine-core or api-frontend.
package constraint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluice-llm/sluice/ipc"
)

// Constraint kinds, as carried in ipc.Constraint.Kind.
const (
	KindJSONSchema = "json_schema"
	KindJSONObject = "json_object"
	KindRegex      = "regex"
	KindChoice     = "choice"
	KindGrammar    = "grammar"
)

// Size limits on a lowered grammar, so that hostile constraints cannot
// make the engine spend unbounded time or memory.
const (
	maxGrammarRules     = 100_000
	maxGrammarTerminals = 20_000
)

// hashOf returns the cache key of a kind and canonical spec.
func hashOf(kind, spec string) string {
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(spec))
	return hex.EncodeToString(h.Sum(nil))
}

// finish checks that the constraint compiles. The size limit is left to
// the caller (CheckBytes, CompileLimit), whose flag may raise it.
func finish(kind, spec string) (ipc.Constraint, error) {
	c := ipc.Constraint{Kind: kind, Spec: spec, Hash: hashOf(kind, spec)}
	if _, err := CompileLimit(c, 0); err != nil {
		return ipc.Constraint{}, err
	}
	return c, nil
}

// JSONSchema validates schema and returns its constraint. The Spec is the
// schema as canonical JSON (keys sorted, except inside "properties" whose
// order is the generation order). strict is accepted for API fidelity: both
// modes constrain fully (see the package doc).
func JSONSchema(schema json.RawMessage, strict bool) (ipc.Constraint, error) {
	return JSONSchemaWhitespace(schema, strict, WhitespaceBounded)
}

// JSONSchemaWhitespace is JSONSchema with whitespace mode w between JSON
// tokens.
func JSONSchemaWhitespace(schema json.RawMessage, strict bool, w Whitespace) (ipc.Constraint, error) {
	_ = strict
	v, err := parseJSON(schema)
	if err != nil {
		return ipc.Constraint{}, fmt.Errorf("json_schema: %w", err)
	}
	return finish(jsonKind(KindJSONSchema, w), jsonText(v))
}

// JSONObject returns the constraint "any JSON object" (response_format
// json_object).
func JSONObject() ipc.Constraint {
	return JSONObjectWhitespace(WhitespaceBounded)
}

// JSONObjectWhitespace is JSONObject with whitespace mode w between JSON
// tokens.
func JSONObjectWhitespace(w Whitespace) ipc.Constraint {
	kind := jsonKind(KindJSONObject, w)
	return ipc.Constraint{Kind: kind, Hash: hashOf(kind, "")}
}

// Regex returns the constraint "the whole output matches pattern" (RE2
// syntax; a leading ^ and trailing $ are accepted and redundant).
func Regex(pattern string) (ipc.Constraint, error) {
	return finish(KindRegex, pattern)
}

// Choice returns the constraint "the output is exactly one of choices".
func Choice(choices []string) (ipc.Constraint, error) {
	if len(choices) == 0 {
		return ipc.Constraint{}, fmt.Errorf("choice: empty list")
	}
	var sb strings.Builder
	sb.WriteByte('[')
	for i, c := range choices {
		if i > 0 {
			sb.WriteByte(',')
		}
		writeJSONString(&sb, c)
	}
	sb.WriteByte(']')
	return finish(KindChoice, sb.String())
}

// GBNF returns the constraint "the output is a word of this grammar",
// written in llama.cpp's GBNF (start rule "root") or, when the text has no
// "::=" definitions, in Lark's EBNF (start rule "start"; see ParseLark).
func GBNF(text string) (ipc.Constraint, error) {
	return finish(KindGrammar, text)
}

// Compile lowers a constraint to the grammar IR, refusing one whose
// compiled size would pass MaxGrammarBytes. It is deterministic: equal
// constraints give equal grammars.
func Compile(c ipc.Constraint) (*Grammar, error) {
	return CompileLimit(c, MaxGrammarBytes)
}

// CheckBytes reports an error naming the limit when c's compiled grammar
// would take more than maxBytes (as EstimateBytes counts it), or when c does
// not compile.
func CheckBytes(c ipc.Constraint, maxBytes int64) error {
	_, err := CompileLimit(c, maxBytes)
	return err
}

// CompileLimit is Compile with the size limit maxBytes (estimated bytes
// once compiled; <= 0: no size limit).
func CompileLimit(c ipc.Constraint, maxBytes int64) (*Grammar, error) {
	var g *Grammar
	kind, ws, err := splitKind(c.Kind)
	if err != nil {
		return nil, err
	}
	switch kind {
	case KindJSONSchema:
		var v *jv
		v, err = parseJSON([]byte(c.Spec))
		if err != nil {
			return nil, fmt.Errorf("json_schema: %w", err)
		}
		g, err = compileSchema(v, ws)
	case KindJSONObject:
		g = compileJSONObject(ws)
	case KindRegex:
		g, err = compileRegex(c.Spec)
	case KindChoice:
		g, err = compileChoice(c.Spec)
	case KindGrammar:
		if IsLark(c.Spec) {
			g, err = ParseLark(c.Spec)
		} else {
			g, err = ParseGBNF(c.Spec)
		}
	default:
		return nil, fmt.Errorf("unknown constraint kind %q", c.Kind)
	}
	if err != nil {
		return nil, err
	}
	if len(g.Rules) > maxGrammarRules || len(g.Terminals) > maxGrammarTerminals {
		return nil, fmt.Errorf("%s: grammar too large (%d rules, %d terminals; limits %d, %d)", c.Kind, len(g.Rules), len(g.Terminals), maxGrammarRules, maxGrammarTerminals)
	}
	if err := g.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Kind, err)
	}
	if err := checkTerminalSizes(c.Kind, g); err != nil {
		return nil, err
	}
	if maxBytes > 0 {
		if n := EstimateBytes(g); n > maxBytes {
			return nil, fmt.Errorf("%s: grammar too large: about %d MiB once compiled (%d patterns), more than the limit of %d MiB (--max-grammar-bytes)", c.Kind, n>>20, len(g.Terminals), maxBytes>>20)
		}
	}
	return g, nil
}

func compileRegex(pattern string) (*Grammar, error) {
	re, err := anchoredPattern(pattern, false)
	if err != nil {
		return nil, fmt.Errorf("regex: %w", err)
	}
	b := newBuilder()
	b.g.Start = b.rule("root")
	b.g.Rules[b.g.Start].Alts = [][]Symbol{{b.term(re)}}
	return &b.g, nil
}

func compileChoice(spec string) (*Grammar, error) {
	var choices []string
	if err := json.Unmarshal([]byte(spec), &choices); err != nil {
		return nil, fmt.Errorf("choice: %w", err)
	}
	if len(choices) == 0 {
		return nil, fmt.Errorf("choice: empty list")
	}
	b := newBuilder()
	b.g.Start = b.rule("root")
	for _, c := range choices {
		if c == "" {
			b.g.Rules[b.g.Start].Alts = append(b.g.Rules[b.g.Start].Alts, nil)
			continue
		}
		b.g.Rules[b.g.Start].Alts = append(b.g.Rules[b.g.Start].Alts, []Symbol{b.lit(c)})
	}
	return &b.g, nil
}
