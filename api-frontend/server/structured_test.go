package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/outputproc/reasoning"
)

const weatherTools = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},{"type":"function","function":{"name":"get_time"}}]`

func (e *testEnv) lastAdd() *ipc.AddRequest {
	e.eng.mu.Lock()
	defer e.eng.mu.Unlock()
	if len(e.eng.added) == 0 {
		e.t.Fatal("no ADD reached the engine")
	}
	return e.eng.added[len(e.eng.added)-1]
}

// TestStructuredAdd: response_format and friends reach the engine as one
// compiled constraint; bad ones are 400s naming the field and keyword.
func TestStructuredAdd(t *testing.T) {
	env := newTestEnv(t, Config{}, "{}")
	const schema = `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`
	cases := []struct{ path, body, kind string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":` + schema + `}}}`, "json_schema"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"response_format":{"type":"json_object"}}`, "json_object"},
		{"/v1/completions", `{"prompt":"x","max_tokens":2,"guided_regex":"[a-z]+"}`, "regex"},
		{"/v1/completions", `{"prompt":"x","max_tokens":2,"structured_outputs":{"choice":["a","b"]}}`, "choice"},
	}
	for _, tc := range cases {
		resp, raw := env.post(tc.path, tc.body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tc.body, resp.StatusCode, raw)
		}
		ct := env.lastAdd().Params.Constraint
		if ct == nil || ct.Kind != tc.kind || ct.Hash == "" || ct.AfterReasoning {
			t.Fatalf("%s: constraint %+v", tc.body, ct)
		}
	}
	resp, raw := env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"t":{"type":"array","uniqueItems":true}}}}}}`)
	var e struct {
		Error struct{ Message, Param string } `json:"error"`
	}
	if err := json.Unmarshal(raw, &e); err != nil || resp.StatusCode != 400 || e.Error.Param != "response_format" ||
		!strings.Contains(e.Error.Message, `unsupported JSON Schema keyword "uniqueItems" at #/properties/t`) {
		t.Fatalf("unsupported keyword: %d %s", resp.StatusCode, raw)
	}
}

// TestStructuredAfterReasoning: with a reasoning parser the constraint
// waits for the end of reasoning unless the prompt closed it already.
func TestStructuredAfterReasoning(t *testing.T) {
	env := newTestEnv(t, Config{ReasoningParser: "qwen3"}, "{}")
	env.srv.deps.NewReasoning = func(c *openai.Chat, prompt string) (ReasoningParser, error) {
		if v, ok := c.Kwargs["enable_thinking"].(bool); ok && !v {
			return nil, nil
		}
		return reasoning.New("qwen3", reasoning.Options{})
	}
	const rf = `"max_tokens":2,"response_format":{"type":"json_object"}`
	cases := []struct {
		path, body string
		after      bool
	}{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],` + rf + `}`, true},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":false},` + rf + `}`, false},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x <think>\n\n</think>"}],` + rf + `}`, false},
		{"/v1/completions", `{"prompt":"x",` + rf + `}`, true},
		{"/v1/completions", `{"prompt":"x<think>\n\n</think>\n\n",` + rf + `}`, false},
	}
	for _, tc := range cases {
		resp, raw := env.post(tc.path, tc.body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tc.body, resp.StatusCode, raw)
		}
		if ct := env.lastAdd().Params.Constraint; ct == nil || ct.AfterReasoning != tc.after {
			t.Fatalf("%s: constraint %+v, want AfterReasoning %v", tc.body, ct, tc.after)
		}
	}
}

type toolResult struct {
	content string
	names   []string
	args    []string
	finish  string
}

// readStream collects a chat stream's content, calls and finish reason.
func readStream(t *testing.T, raw []byte) toolResult {
	var r toolResult
	evs := sseEvents(t, raw)
	for _, e := range evs[:len(evs)-1] {
		var c toolChunk
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("%v: %s", err, e)
		}
		if len(c.Choices) == 0 {
			continue
		}
		d := c.Choices[0].Delta
		if d.Content != nil {
			r.content += *d.Content
		}
		for _, tc := range d.ToolCalls {
			for len(r.args) <= tc.Index {
				r.args = append(r.args, "")
				r.names = append(r.names, "")
			}
			r.names[tc.Index] += tc.Function.Name
			r.args[tc.Index] += tc.Function.Arguments
		}
		if c.Choices[0].FinishReason != nil {
			r.finish = *c.Choices[0].FinishReason
		}
	}
	return r
}

// TestToolChoiceConstrained: required and named tool_choice produce tool
// calls (never markup in content) from each output form, streamed and
// not, with vLLM's finish reasons.
func TestToolChoiceConstrained(t *testing.T) {
	const named = `{"type":"function","function":{"name":"get_weather"}}`
	hermesTwo := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"
	hermesOne := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	array := `[{"name": "get_weather", "parameters": {"city": "Paris"}}, {"name": "get_time", "parameters": {}}]`
	cases := []struct {
		name, parser, choice, script string
		kind                         string
		names                        []string
		finish                       string
	}{
		{"hermes required", "hermes", `"required"`, hermesTwo, "grammar", []string{"get_weather", "get_time"}, "tool_calls"},
		{"hermes named", "hermes", named, hermesOne, "grammar", []string{"get_weather"}, "stop"},
		{"mistral required", "mistral", `"required"`, `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]`, "grammar", []string{"get_weather"}, "tool_calls"},
		{"llama3 named", "llama3_json", named, `{"name": "get_weather", "parameters": {"city": "Paris"}}`, "grammar", []string{"get_weather"}, "stop"},
		{"no parser required", "", `"required"`, array, "grammar", []string{"get_weather", "get_time"}, "tool_calls"},
		{"qwen3_coder required", "qwen3_coder", `"required"`, array, "grammar", []string{"get_weather", "get_time"}, "tool_calls"},
		{"no parser named", "", named, `{"city": "Paris"}`, "json_schema", []string{"get_weather"}, "stop"},
		{"pythonic named", "pythonic", named, `{"city": "Paris"}`, "json_schema", []string{"get_weather"}, "stop"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, Config{ToolCallParser: tc.parser, EnableAutoToolChoice: tc.parser != ""}, tc.script)
			env.eng.mu.Lock()
			env.eng.eos = true
			env.eng.mu.Unlock()
			body := `{"messages":[{"role":"user","content":"weather?"}],` + weatherTools + `,"tool_choice":` + tc.choice + `,"max_tokens":220`
			resp, raw := env.post("/v1/chat/completions", body+`,"stream":true}`)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, raw)
			}
			if ct := env.lastAdd().Params.Constraint; ct == nil || ct.Kind != tc.kind {
				t.Fatalf("constraint %+v, want %s", ct, tc.kind)
			}
			r := readStream(t, raw)
			check := func(how string, r toolResult) {
				t.Helper()
				if r.content != "" || r.finish != tc.finish || strings.Join(r.names, ",") != strings.Join(tc.names, ",") {
					t.Fatalf("%s: content %q finish %q calls %v %v", how, r.content, r.finish, r.names, r.args)
				}
				for _, a := range r.args {
					if !json.Valid([]byte(a)) {
						t.Fatalf("%s: arguments %q", how, a)
					}
				}
				if !strings.Contains(r.args[0], "Paris") {
					t.Fatalf("%s: arguments %q", how, r.args[0])
				}
			}
			check("stream", r)
			_, raw = env.post("/v1/chat/completions", body+`}`)
			var resp2 struct {
				Choices []struct {
					Message struct {
						Content   *string `json:"content"`
						ToolCalls []struct {
							Function struct{ Name, Arguments string } `json:"function"`
						} `json:"tool_calls"`
					} `json:"message"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(raw, &resp2); err != nil {
				t.Fatal(err)
			}
			m := resp2.Choices[0].Message
			r = toolResult{finish: resp2.Choices[0].FinishReason}
			if m.Content != nil {
				r.content = *m.Content
			}
			for _, c := range m.ToolCalls {
				r.names = append(r.names, c.Function.Name)
				r.args = append(r.args, c.Function.Arguments)
			}
			check("non-stream", r)
		})
	}
}

// TestJSONArrayTruncated: output cut off before the generic array became a
// call comes back as content, without the internal marker.
func TestJSONArrayTruncated(t *testing.T) {
	env := newTestEnv(t, Config{}, `[{"name": "get_weather"`)
	_, raw := env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"w"}],`+weatherTools+`,"tool_choice":"required","max_tokens":5,"stream":true}`)
	r := readStream(t, raw)
	if r.content != `[{"na` || r.finish != "length" || len(r.names) != 0 {
		t.Fatalf("content %q finish %q calls %v", r.content, r.finish, r.names)
	}
}
