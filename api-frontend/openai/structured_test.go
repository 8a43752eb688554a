package openai

import (
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/constraint"
)

const testMsgs = `"messages":[{"role":"user","content":"hi"}]`

const testSchema = `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`

// validateChat decodes and validates a chat body with a hermes parser.
func validateChat(t *testing.T, body string, parser string) (*Chat, *Error) {
	t.Helper()
	var r ChatRequest
	if e := Decode([]byte(body), &r); e != nil {
		return nil, e
	}
	return r.Validate(Limits{}, ToolConfig{AutoEnabled: true, Parser: parser})
}

func validateCompletion(t *testing.T, body string) (*Completion, *Error) {
	t.Helper()
	var r CompletionRequest
	if e := Decode([]byte(body), &r); e != nil {
		return nil, e
	}
	return r.Validate(Limits{})
}

// TestStructuredFields maps every request form to its constraint, on both
// endpoints.
func TestStructuredFields(t *testing.T) {
	cases := []struct {
		name, field string
		kind        string // "" : no constraint
		param       string
	}{
		{"text", `"response_format":{"type":"text"}`, "", ""},
		{"json_object", `"response_format":{"type":"json_object"}`, constraint.KindJSONObject, "response_format"},
		{"json_schema", `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + testSchema + `,"strict":true}}`, constraint.KindJSONSchema, "response_format"},
		{"so json", `"structured_outputs":{"json":` + testSchema + `}`, constraint.KindJSONSchema, "structured_outputs"},
		{"so json string", `"structured_outputs":{"json":"{\"type\":\"integer\"}"}`, constraint.KindJSONSchema, "structured_outputs"},
		{"so regex", `"structured_outputs":{"regex":"[0-9]{3}"}`, constraint.KindRegex, "structured_outputs"},
		{"so choice", `"structured_outputs":{"choice":["yes","no"]}`, constraint.KindChoice, "structured_outputs"},
		{"so grammar", `"structured_outputs":{"grammar":"root ::= \"a\" | \"b\""}`, constraint.KindGrammar, "structured_outputs"},
		{"so lark", `"structured_outputs":{"grammar":"start: \"a\"+"}`, constraint.KindGrammar, "structured_outputs"},
		{"so json_object", `"structured_outputs":{"json_object":true}`, constraint.KindJSONObject, "structured_outputs"},
		{"so json_object false", `"structured_outputs":{"json_object":false}`, "", ""},
		{"guided_json", `"guided_json":` + testSchema, constraint.KindJSONSchema, "guided_json"},
		{"guided_json string", `"guided_json":"{\"type\":\"boolean\"}"`, constraint.KindJSONSchema, "guided_json"},
		{"guided_regex", `"guided_regex":"a+b"`, constraint.KindRegex, "guided_regex"},
		{"guided_choice", `"guided_choice":["x","y"]`, constraint.KindChoice, "guided_choice"},
		{"guided_grammar", `"guided_grammar":"root ::= [a-z]+"`, constraint.KindGrammar, "guided_grammar"},
		{"null fields", `"guided_json":null,"structured_outputs":null,"response_format":null`, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chat, e := validateChat(t, `{`+testMsgs+`,`+tc.field+`}`, "")
			if e != nil {
				t.Fatalf("chat: %v", e)
			}
			comp, e := validateCompletion(t, `{"prompt":"p",`+tc.field+`}`)
			if e != nil {
				t.Fatalf("completion: %v", e)
			}
			for _, o := range []*Options{&chat.Options, &comp.Options} {
				ct := o.Params.Constraint
				if tc.kind == "" {
					if ct != nil {
						t.Fatalf("unexpected constraint %+v", ct)
					}
					continue
				}
				if ct == nil || ct.Kind != tc.kind || len(ct.Hash) != 64 || ct.AfterReasoning || o.ConstraintParam != tc.param {
					t.Fatalf("constraint %+v (param %q), want kind %s param %s", ct, o.ConstraintParam, tc.kind, tc.param)
				}
				if _, err := constraint.Compile(*ct); err != nil {
					t.Fatalf("compile: %v", err)
				}
			}
		})
	}
}

// TestStructuredCanonical: the same schema written two ways gives one
// cache key.
func TestStructuredCanonical(t *testing.T) {
	a, e := validateCompletion(t, `{"prompt":"p","guided_json":{"type":"object","required":["a"],"properties":{"a":{"type":"integer"}}}}`)
	if e != nil {
		t.Fatal(e)
	}
	b, e := validateCompletion(t, `{"prompt":"p","response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{ "required" : ["a"], "properties":{"a":{"type":"integer"}},"type":"object"}}}}`)
	if e != nil {
		t.Fatal(e)
	}
	if a.Params.Constraint.Hash != b.Params.Constraint.Hash {
		t.Fatalf("hashes differ: %s vs %s", a.Params.Constraint.Spec, b.Params.Constraint.Spec)
	}
}

// TestStructuredErrors: conflicts, unsupported keywords and malformed
// fields are 400s naming the field.
func TestStructuredErrors(t *testing.T) {
	const tools = `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
	cases := []struct {
		name, field string
		param       string
		msg         string
	}{
		{"two fields", `"response_format":{"type":"json_object"},"guided_regex":"a"`, "guided_regex", "only one structured output constraint"},
		{"two in structured_outputs", `"structured_outputs":{"regex":"a","choice":["b"]}`, "structured_outputs", "only one"},
		{"legacy and new", `"guided_choice":["a"],"structured_outputs":{"json_object":true}`, "guided_choice", "only one"},
		{"unsupported keyword", `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"array","uniqueItems":true}}}`, "response_format", `unsupported JSON Schema keyword "uniqueItems" at #`},
		{"unsupported nested", `"guided_json":{"type":"object","properties":{"n":{"type":"number","multipleOf":2}}}`, "guided_json", `unsupported JSON Schema keyword "multipleOf" at #/properties/n`},
		{"unsupported so", `"structured_outputs":{"json":{"not":{}}}`, "structured_outputs", `unsupported JSON Schema keyword "not"`},
		{"bad type", `"response_format":{"type":"xml"}`, "response_format", "response_format.type must be"},
		{"schema missing", `"response_format":{"type":"json_schema","json_schema":{"name":"x"}}`, "response_format", "needs json_schema.schema"},
		{"schema not object", `"guided_json":[1]`, "guided_json", "must be a JSON Schema object"},
		{"bad regex", `"guided_regex":"(a"`, "guided_regex", "invalid guided_regex"},
		{"empty choice", `"guided_choice":[]`, "guided_choice", "invalid guided_choice"},
		{"bad grammar", `"guided_grammar":"root ::= undefined_rule"`, "guided_grammar", "invalid guided_grammar"},
		{"structural tag", `"response_format":{"type":"structural_tag"}`, "response_format", "not supported"},
		{"wrong field type", `"response_format":{"type":5}`, "response_format", "invalid type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, e := validateChat(t, `{`+testMsgs+`,`+tc.field+`}`, "hermes")
			if e == nil || e.Status != 400 || e.Param != tc.param || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("chat: got %v, want 400 param %s with %q", e, tc.param, tc.msg)
			}
			_, e = validateCompletion(t, `{"prompt":"p",`+tc.field+`}`)
			if e == nil || e.Status != 400 || e.Param != tc.param || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("completion: got %v, want 400 param %s with %q", e, tc.param, tc.msg)
			}
		})
	}
	// tool_choice required/named is a constraint too.
	for _, choice := range []string{`"required"`, `{"type":"function","function":{"name":"f"}}`} {
		_, e := validateChat(t, `{`+testMsgs+`,`+tools+`,"tool_choice":`+choice+`,"response_format":{"type":"json_object"}}`, "hermes")
		if e == nil || e.Param != "tool_choice" || !strings.Contains(e.Message, "response_format and tool_choice") {
			t.Fatalf("tool_choice %s with response_format: %v", choice, e)
		}
	}
	// A tool schema the grammar cannot honour names the tool and keyword.
	_, e := validateChat(t, `{`+testMsgs+`,"tools":[{"type":"function","function":{"name":"g","parameters":{"type":"object","patternProperties":{"x":{}}}}}],"tool_choice":"required"}`, "hermes")
	if e == nil || e.Param != "tools" || !strings.Contains(e.Message, `tool "g"`) || !strings.Contains(e.Message, `"patternProperties"`) {
		t.Fatalf("bad tool schema: %v", e)
	}
}

func TestReasoningClosed(t *testing.T) {
	cases := []struct {
		prompt string
		want   bool
	}{
		{"<|im_start|>assistant\n", false},
		{"<|im_start|>assistant\n<think>\n", false},
		{"<|im_start|>assistant\n<think>\n\n</think>\n\n", true},
		{"old <think>x</think> turn, new <think>", false},
		{"old <think>x</think> turn", true},
	}
	for _, tc := range cases {
		if got := ReasoningClosed(tc.prompt); got != tc.want {
			t.Errorf("ReasoningClosed(%q) = %v", tc.prompt, got)
		}
	}
}

// TestJSONWhitespace: JSON constraints get the server's whitespace mode
// (bounded by default: llama.cpp's), vLLM's
// structured_outputs.disable_any_whitespace true makes them compact, and
// the engine's matcher enforces the result, for schemas and json_object
// alike; other kinds are left alone.
func TestJSONWhitespace(t *testing.T) {
	bm := newByteMatcher(t)
	validate := func(body string, ws constraint.Whitespace) *Chat {
		t.Helper()
		var r ChatRequest
		if e := Decode([]byte(body), &r); e != nil {
			t.Fatal(e)
		}
		chat, e := r.Validate(Limits{JSONWhitespace: ws}, ToolConfig{})
		if e != nil {
			t.Fatalf("%s: %v", body, e)
		}
		return chat
	}
	// texts maps JSON texts to their verdicts in bounded, compact and any.
	texts := map[string][3]bool{
		`{"a":1}`:          {true, true, true},
		`{ "a": 1 }`:       {true, true, true},
		"{\n  \"a\": 1\n}": {true, false, true},
		"\n\n{\"a\":1}":    {false, false, true},
		`{"a":  1}`:        {false, false, true},
		"{\n\n\n\"a\":1}":  {false, false, true},
		"{\n" + strings.Repeat(" ", 21) + `"a":1}`: {false, false, false},
	}
	fields := []string{`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + testSchema + `}}`, `"response_format":{"type":"json_object"}`, `"guided_json":` + testSchema}
	cases := []struct {
		name   string
		server constraint.Whitespace
		so     string // structured_outputs extra, "" for none
		want   constraint.Whitespace
	}{
		{"default", constraint.WhitespaceBounded, "", constraint.WhitespaceBounded},
		{"request compact", constraint.WhitespaceBounded, `"structured_outputs":{"disable_any_whitespace":true}`, constraint.WhitespaceCompact},
		{"request false", constraint.WhitespaceBounded, `"structured_outputs":{"disable_any_whitespace":false}`, constraint.WhitespaceBounded},
		{"server compact", constraint.WhitespaceCompact, "", constraint.WhitespaceCompact},
		{"server compact, request false", constraint.WhitespaceCompact, `"structured_outputs":{"disable_any_whitespace":false}`, constraint.WhitespaceBounded},
		{"server any", constraint.WhitespaceAny, "", constraint.WhitespaceAny},
		{"server any, request compact", constraint.WhitespaceAny, `"structured_outputs":{"disable_any_whitespace":true}`, constraint.WhitespaceCompact},
	}
	for _, tc := range cases {
		for _, field := range fields {
			body := `{` + testMsgs + `,` + field
			if tc.so != "" {
				body += `,` + tc.so
			}
			ct := *validate(body+`}`, tc.server).Params.Constraint
			if !constraint.IsJSON(ct.Kind) || strings.HasSuffix(ct.Kind, "+"+tc.want.String()) != (tc.want != constraint.WhitespaceBounded) {
				t.Fatalf("%s: %s: kind %q, want mode %s", tc.name, field, ct.Kind, tc.want)
			}
			for text, verdicts := range texts {
				if got := bm.accepts(t, ct, text); got != verdicts[tc.want] {
					t.Errorf("%s: %s: accepts(%q) = %v", tc.name, field, text, got)
				}
			}
		}
	}
	// Other kinds are left alone.
	chat := validate(`{`+testMsgs+`,"structured_outputs":{"regex":"a b","disable_any_whitespace":true}}`, constraint.WhitespaceBounded)
	if chat.Params.Constraint.Kind != constraint.KindRegex {
		t.Fatalf("regex: %+v", chat.Params.Constraint)
	}
}
