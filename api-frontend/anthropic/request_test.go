package anthropic

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMap checks how Messages fields land in the chat request (fragments
// of its JSON), or which param an error names.
func TestMap(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		count    bool
		want     []string
		errParam string
	}{
		{name: "string content", body: `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
			want: []string{`"messages":[{"role":"user","content":"hi"}]`, `"max_completion_tokens":5`}},
		{name: "system blocks", body: `{"max_tokens":5,"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b"}],"messages":[{"role":"user","content":"q"}]}`,
			want: []string{`{"role":"system","content":"ab"}`}},
		{name: "tool turn", body: `{"max_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"a"},{"type":"tool_use","id":"toolu_1","name":"f","input":{"x":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"bad","is_error":true},{"type":"text","text":"again"}]}]}`,
			want: []string{`{"role":"assistant","content":"a","reasoning_content":"t","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]}`,
				`{"role":"tool","content":"Error: bad","tool_call_id":"toolu_1"},{"role":"user","content":"again"}`}},
		{name: "tools and choice", body: `{"max_tokens":5,"messages":[{"role":"user","content":"q"}],"tools":[{"name":"f","description":"d","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}},{"type":"bash_20250124","name":"bash"}],"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`,
			want: []string{`"tools":[{"function":{"description":"d","name":"f","parameters":{"type":"object"}},"type":"function"}]`, `"tool_choice":"required"`, `"parallel_tool_calls":false`}},
		{name: "thinking off, effort, stops", body: `{"max_tokens":5,"messages":[{"role":"user","content":"q"}],"thinking":{"type":"disabled"},"output_config":{"effort":"low"},"stop_sequences":["END"],"top_k":3,"metadata":{"user_id":"u"},"context_management":{}}`,
			want: []string{`"enable_thinking":false`, `"reasoning_effort":"low"`, `"stop":["END"]`, `"top_k":3`}},
		{name: "count_tokens needs no max_tokens", count: true, body: `{"messages":[{"role":"user","content":"q"}]}`,
			want: []string{`"max_completion_tokens":null`}},
		{name: "max_tokens required", body: `{"messages":[{"role":"user","content":"q"}]}`, errParam: "max_tokens"},
		{name: "orphan tool_result", body: `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"r"}]}]}`, errParam: "messages"},
		{name: "unknown tool", body: `{"max_tokens":5,"messages":[{"role":"user","content":"q"}],"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"g"}}`, errParam: "tool_choice"},
		{name: "image", body: `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, errParam: "messages"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, e := Decode([]byte(tc.body))
			if e != nil {
				t.Fatalf("decode: %v", e)
			}
			m, e := Map(r, tc.count)
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
		})
	}
}
