package responses

import (
	"encoding/json"
	"testing"
)

type sealer struct{}

func (sealer) Open(s string) (string, error) { return "opened:" + s, nil }

// FuzzMap feeds arbitrary bodies to Decode and Map: no panic, and a mapped
// request holds only chat messages with a role (what the template needs).
// body is the request body.
func FuzzMap(f *testing.F) {
	for _, s := range []string{
		`{"input":"hi"}`,
		`{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"r"},{"type":"reasoning","encrypted_content":"x"},{"role":"assistant","content":[{"type":"output_text","text":"a"}]}]}`,
		`{"input":"x","tools":[{"type":"namespace","name":"n","tools":[{"type":"function","name":"f"},{"type":"web_search"}]},{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"n__f"}}`,
		`{"input":"x","text":{"format":{"type":"json_schema","schema":{}}},"reasoning":{"effort":"high"},"max_output_tokens":5,"instructions":"be brief"}`,
		`{"input":[{"role":"developer","content":[{"type":"input_image"}]}]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r, e := Decode([]byte(body))
		if e != nil {
			if e.Status != 400 {
				t.Fatalf("decode error status %d", e.Status)
			}
			return
		}
		m, e := Map(r, nil, sealer{})
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
