package anthropic

import (
	"encoding/json"
	"testing"
)

// FuzzMap feeds arbitrary bodies to Decode and Map: no panic, 4xx errors
// only, and a mapped request holds only chat messages with a role.
// body is the request body; count selects count_tokens' relaxed rules.
func FuzzMap(f *testing.F) {
	for _, s := range []string{
		`{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"max_tokens":5,"system":[{"type":"text","text":"s"}],"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"tool_use","id":"t","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"}],"is_error":true},{"type":"text","text":"more"}]}],"tools":[{"name":"f","input_schema":{}},{"type":"web_search_20250305","name":"w"}],"tool_choice":{"type":"tool","name":"f","disable_parallel_tool_use":true}}`,
		`{"max_tokens":5,"thinking":{"type":"disabled"},"output_config":{"effort":"low"},"stop_sequences":["x"],"messages":[{"role":"user","content":[]}]}`,
	} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, body string, count bool) {
		r, e := Decode([]byte(body))
		if e != nil {
			if e.Status != 400 {
				t.Fatalf("decode error status %d", e.Status)
			}
			return
		}
		m, e := Map(r, count)
		if e != nil {
			if e.Status < 400 || e.Status > 499 || e.Message == "" {
				t.Fatalf("map error %+v", e)
			}
			return
		}
		for _, raw := range m.Chat.Messages {
			var v struct {
				Role string `json:"role"`
			}
			if json.Unmarshal(raw, &v) != nil || v.Role == "" {
				t.Fatalf("mapped message %s", raw)
			}
		}
	})
}
