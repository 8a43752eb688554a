package openai

import (
	"strings"
	"testing"
)

// TestReasoningEffort checks that a chat request's reasoning_effort reaches
// the template kwargs (chat_template_kwargs winning) and that unknown
// values are a 400 naming the field.
func TestReasoningEffort(t *testing.T) {
	for _, tc := range []struct {
		name, body, want, err string
	}{
		{"absent", `{"messages":[{"role":"user","content":"x"}]}`, "", ""},
		{"high", `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"high"}`, "high", ""},
		{"kwargs win", `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"high","chat_template_kwargs":{"reasoning_effort":"low"}}`, "low", ""},
		{"kept beside other kwargs", `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"minimal","chat_template_kwargs":{"enable_thinking":true}}`, "minimal", ""},
		{"unknown", `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"extreme"}`, "", "reasoning_effort must be one of"},
		{"wrong type", `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":3}`, "", "reasoning_effort"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r ChatRequest
			e := Decode([]byte(tc.body), &r)
			var c *Chat
			if e == nil {
				c, e = r.Validate(Limits{VocabSize: 100, MaxModelLen: 64}, ToolConfig{})
			}
			if tc.err != "" {
				if e == nil || e.Status != 400 || !strings.Contains(e.Error(), tc.err) {
					t.Fatalf("error %v, want a 400 containing %q", e, tc.err)
				}
				return
			}
			if e != nil {
				t.Fatal(e)
			}
			got, _ := c.Kwargs["reasoning_effort"].(string)
			if got != tc.want {
				t.Errorf("reasoning_effort kwarg %q, want %q", got, tc.want)
			}
		})
	}
}
