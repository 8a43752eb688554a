package responses

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMap checks how request fields land in the chat request: a case
// gives a body and either the expected chat fields (as JSON fragments
// found in the marshalled chat request) or the error's param.
func TestMap(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		want     []string // fragments of the mapped chat request's JSON
		dropped  string
		errParam string
	}{
		{name: "string input", body: `{"input":"hi"}`,
			want: []string{`"messages":[{"role":"user","content":"hi"}]`}},
		{name: "instructions first", body: `{"instructions":"be brief","input":[{"role":"developer","content":"d"}]}`,
			want: []string{`"messages":[{"role":"system","content":"be brief"},{"role":"developer","content":"d"}]`}},
		{name: "calls join the assistant turn", body: `{"input":[{"role":"user","content":"q"},{"type":"reasoning","content":[{"type":"reasoning_text","text":"think"}]},{"role":"assistant","content":[{"type":"output_text","text":"a"}]},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"r"}]}`,
			want: []string{`{"role":"assistant","content":"a","reasoning_content":"think","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"r","tool_call_id":"c1"}`}},
		{name: "encrypted reasoning opened", body: `{"input":[{"type":"reasoning","encrypted_content":"abc"},{"role":"assistant","content":"x"}]}`,
			want: []string{`"reasoning_content":"opened:abc"`}},
		{name: "namespace flattened, hosted dropped", body: `{"input":"x","tools":[{"type":"function","name":"read"},{"type":"namespace","name":"fs","tools":[{"type":"function","name":"read"},{"type":"function","name":"write"}]},{"type":"web_search"}],"tool_choice":{"type":"function","name":"fs__read"}}`,
			want: []string{`"name":"read"`, `"name":"fs__read"`, `"name":"write"`, `"tool_choice":{"function":{"name":"fs__read"},"type":"function"}`}, dropped: "web_search"},
		{name: "auto left to the server", body: `{"input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":"auto"}`,
			want: []string{`"tool_choice":null`}},
		{name: "required", body: `{"input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":"required"}`,
			want: []string{`"tool_choice":"required"`}},
		{name: "format and effort", body: `{"input":"x","text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object"},"strict":true}},"reasoning":{"effort":"low"},"max_output_tokens":7}`,
			want: []string{`"response_format":{"type":"json_schema","json_schema":{"name":"s","description":"","schema":{"type":"object"},"strict":true}}`, `"chat_template_kwargs":{"reasoning_effort":"low"}`, `"max_completion_tokens":7`}},
		{name: "vllm extras kept", body: `{"input":"x","seed":3,"top_k":5,"stop":["END"]}`,
			want: []string{`"seed":3`, `"top_k":5`, `"stop":["END"]`}},
		{name: "unknown fields accepted", body: `{"input":"x","store":false,"prompt_cache_key":"k","client_metadata":{"a":1},"include":["reasoning.encrypted_content"],"service_tier":"auto","truncation":"auto","parallel_tool_calls":false}`,
			want: []string{`"parallel_tool_calls":false`}},
		{name: "orphan output", body: `{"input":[{"type":"function_call_output","call_id":"c","output":"r"}]}`, errParam: "input"},
		{name: "unknown named tool", body: `{"input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`, errParam: "tool_choice"},
		{name: "n", body: `{"input":"x","n":2}`, errParam: "n"},
		{name: "empty", body: `{"input":[]}`, errParam: "input"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, e := Decode([]byte(tc.body))
			if e != nil {
				t.Fatalf("decode: %v", e)
			}
			m, e := Map(r, nil, sealer{})
			if tc.errParam != "" {
				if e == nil || e.Param != tc.errParam || e.Status != 400 {
					t.Fatalf("error %+v, want param %s", e, tc.errParam)
				}
				return
			}
			if e != nil {
				t.Fatal(e)
			}
			b, _ := json.Marshal(m.Chat)
			for _, w := range tc.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("mapped request lacks %s:\n%s", w, b)
				}
			}
			if strings.Join(m.Dropped, ",") != tc.dropped {
				t.Errorf("dropped %v, want %q", m.Dropped, tc.dropped)
			}
		})
	}
}
