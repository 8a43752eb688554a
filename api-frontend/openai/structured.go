package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/sluice-llm/sluice/constraint"
	"github.com/sluice-llm/sluice/ipc"
)

// ResponseFormat is the OpenAI response_format object: type "text",
// "json_object" or "json_schema" (then JSONSchema is set).
type ResponseFormat struct {
	Type       string          `json:"type"`
	JSONSchema *JSONSchemaSpec `json:"json_schema"`
}

// JSONSchemaSpec is response_format.json_schema.
type JSONSchemaSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

// StructuredOutputs is vLLM's structured_outputs object; at most one of
// its constraint fields may be set. DisableAnyWhitespace true (with any
// JSON constraint of the request) allows at most one space between JSON
// tokens instead of the server's default (constraint.Whitespace).
type StructuredOutputs struct {
	DisableAnyWhitespace *bool           `json:"disable_any_whitespace"`
	JSON                 json.RawMessage `json:"json"`
	Regex                *string         `json:"regex"`
	Choice               []string        `json:"choice"`
	Grammar              *string         `json:"grammar"`
	JSONObject           *bool           `json:"json_object"`
	StructuralTag        json.RawMessage `json:"structural_tag"`
}

// structuredFields are the request fields that ask for structured output,
// shared by completions and chat.
type structuredFields struct {
	ResponseFormat    *ResponseFormat    `json:"response_format"`
	StructuredOutputs *StructuredOutputs `json:"structured_outputs"`
	GuidedJSON        json.RawMessage    `json:"guided_json"`
	GuidedRegex       *string            `json:"guided_regex"`
	GuidedChoice      []string           `json:"guided_choice"`
	GuidedGrammar     *string            `json:"guided_grammar"`
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// pendingConstraint is one constraint a request asked for, not compiled
// yet: param names the field, key is the request text that determines it
// (for the cache), build compiles it with whitespace mode ws (used by JSON
// constraints only).
type pendingConstraint struct {
	param string
	key   string
	build func(ws constraint.Whitespace) (ipc.Constraint, error)
}

// jsonSchemaValue accepts a schema given as a JSON object or as a string
// holding one (vLLM accepts both for guided_json and structured_outputs.json).
func jsonSchemaValue(raw json.RawMessage) (json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		raw = bytes.TrimSpace([]byte(s))
	}
	if len(raw) == 0 || (raw[0] != '{' && string(raw) != "true") {
		return nil, false
	}
	return raw, true
}

// constraints lists every structured-output constraint the fields ask for.
func (f *structuredFields) constraints() ([]pendingConstraint, *Error) {
	var out []pendingConstraint
	schema := func(param string, raw json.RawMessage, strict bool) *Error {
		s, ok := jsonSchemaValue(raw)
		if !ok {
			return BadRequest(param, "%s must be a JSON Schema object (or a string holding one)", param)
		}
		key := "json_schema\x00" + strconv.FormatBool(strict) + "\x00" + string(s)
		out = append(out, pendingConstraint{param, key, func(ws constraint.Whitespace) (ipc.Constraint, error) {
			return constraint.JSONSchemaWhitespace(s, strict, ws)
		}})
		return nil
	}
	if rf := f.ResponseFormat; rf != nil {
		switch rf.Type {
		case "text":
		case "json_object":
			out = append(out, pendingConstraint{"response_format", "json_object", jsonObject})
		case "json_schema":
			if rf.JSONSchema == nil || isNull(rf.JSONSchema.Schema) {
				return nil, BadRequest("response_format", "response_format of type json_schema needs json_schema.schema")
			}
			strict := rf.JSONSchema.Strict != nil && *rf.JSONSchema.Strict
			if e := schema("response_format", rf.JSONSchema.Schema, strict); e != nil {
				return nil, e
			}
		case "structural_tag":
			return nil, BadRequest("response_format", "response_format of type structural_tag is not supported")
		default:
			return nil, BadRequest("response_format", "response_format.type must be text, json_object or json_schema, got %q", rf.Type)
		}
	}
	if so := f.StructuredOutputs; so != nil {
		const p = "structured_outputs"
		if !isNull(so.JSON) {
			if e := schema(p, so.JSON, true); e != nil {
				return nil, e
			}
		}
		if so.Regex != nil {
			re := *so.Regex
			out = append(out, pendingConstraint{p, "regex\x00" + re, func(constraint.Whitespace) (ipc.Constraint, error) { return constraint.Regex(re) }})
		}
		if so.Choice != nil {
			ch := so.Choice
			out = append(out, pendingConstraint{p, choiceKey(ch), func(constraint.Whitespace) (ipc.Constraint, error) { return constraint.Choice(ch) }})
		}
		if so.Grammar != nil {
			g := *so.Grammar
			out = append(out, pendingConstraint{p, "grammar\x00" + g, func(constraint.Whitespace) (ipc.Constraint, error) { return constraint.GBNF(g) }})
		}
		if so.JSONObject != nil && *so.JSONObject {
			out = append(out, pendingConstraint{p, "json_object", jsonObject})
		}
		if !isNull(so.StructuralTag) {
			return nil, BadRequest(p, "structured_outputs.structural_tag is not supported")
		}
	}
	if !isNull(f.GuidedJSON) {
		if e := schema("guided_json", f.GuidedJSON, true); e != nil {
			return nil, e
		}
	}
	if f.GuidedRegex != nil {
		re := *f.GuidedRegex
		out = append(out, pendingConstraint{"guided_regex", "regex\x00" + re, func(constraint.Whitespace) (ipc.Constraint, error) { return constraint.Regex(re) }})
	}
	if f.GuidedChoice != nil {
		ch := f.GuidedChoice
		out = append(out, pendingConstraint{"guided_choice", choiceKey(ch), func(constraint.Whitespace) (ipc.Constraint, error) { return constraint.Choice(ch) }})
	}
	if f.GuidedGrammar != nil {
		g := *f.GuidedGrammar
		out = append(out, pendingConstraint{"guided_grammar", "grammar\x00" + g, func(constraint.Whitespace) (ipc.Constraint, error) { return constraint.GBNF(g) }})
	}
	return out, nil
}

// jsonObject builds the json_object constraint.
func jsonObject(ws constraint.Whitespace) (ipc.Constraint, error) {
	return constraint.JSONObjectWhitespace(ws), nil
}

// choiceKey is the cache key of a choice list.
func choiceKey(choices []string) string {
	b, _ := json.Marshal(choices)
	return "choice\x00" + string(b)
}

// constraintError turns a constraint compile error into a 400 naming
// param; an unsupported JSON Schema keyword is named in the message.
func constraintError(param string, err error) *Error {
	var ue *constraint.UnsupportedError
	if errors.As(err, &ue) {
		return BadRequest(param, "%s: %v", param, err)
	}
	return BadRequest(param, "invalid %s: %v", param, err)
}

// tooMany is the 400 for a request asking for more than one constraint.
func tooMany(params []string) *Error {
	return BadRequest(params[1], "only one structured output constraint may be given per request, got %s", strings.Join(params, " and "))
}

// compileStructured compiles the request's constraint, if any, into
// o.Params.Constraint (through lim.Constraints). JSON constraints get
// lim.JSONWhitespace, or compact whitespace with
// structured_outputs.disable_any_whitespace true (false when the server's
// default is compact: bounded). extra names constraints the caller adds
// itself (tool_choice), counted for the conflict check. The grammar's
// estimated compiled size is bounded by lim.MaxGrammarBytes
// (--max-grammar-bytes).
func (f *structuredFields) compileStructured(lim Limits, o *Options, extra ...string) *Error {
	maxBytes := lim.grammarBytes()
	pend, e := f.constraints()
	if e != nil {
		return e
	}
	var params []string
	for _, p := range pend {
		params = append(params, p.param)
	}
	params = append(params, extra...)
	if len(params) > 1 {
		return tooMany(params)
	}
	if len(pend) == 0 {
		return nil
	}
	ws := lim.JSONWhitespace
	if so := f.StructuredOutputs; so != nil && so.DisableAnyWhitespace != nil {
		switch {
		case *so.DisableAnyWhitespace:
			ws = constraint.WhitespaceCompact
		case ws == constraint.WhitespaceCompact:
			ws = constraint.WhitespaceBounded
		}
	}
	key := pend[0].key
	if ws != constraint.WhitespaceBounded {
		key = ws.String() + "\x00" + key
	}
	ct, _, err := lim.Constraints.get(key, func() (ipc.Constraint, ToolOutput, error) {
		ct, err := pend[0].build(ws)
		if err == nil {
			err = constraint.CheckBytes(ct, maxBytes)
		}
		return ct, ToolOutputNone, err
	})
	if err != nil {
		return constraintError(pend[0].param, err)
	}
	o.Params.Constraint = &ct
	o.ConstraintParam = pend[0].param
	return nil
}

// ReasoningClosed reports whether a prompt already ended the model's
// reasoning: scanning back from its end, a "</think>" comes before any
// "<think>" (vLLM's is_reasoning_end over the prompt). Qwen3 templates
// with enable_thinking false end the prompt with "<think>\n\n</think>\n\n".
func ReasoningClosed(prompt string) bool {
	end := strings.LastIndex(prompt, "</think>")
	return end >= 0 && end >= strings.LastIndex(prompt, "<think>")
}
