package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/api-frontend/engineclient"
	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/outputproc/reasoning"
	"time"
)

type toolChunk struct {
	Choices []struct {
		Delta struct {
			Content   *string `json:"content"`
			Reasoning *string `json:"reasoning"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

// TestToolsAndReasoningEveryInterval streams reasoning, prose and a hermes
// tool call at several stream intervals: the parsed result must not depend
// on how tokens were grouped.
func TestToolsAndReasoningEveryInterval(t *testing.T) {
	script := `<think>Let me check.</think>Checking.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>`
	eng := newFakeEngine(script, time.Millisecond)
	eng.eos = true
	client := engineclient.New([]engineclient.Transport{eng}, engineclient.Options{})
	srv := New(Config{ServedModelNames: []string{"m"}, EnableAutoToolChoice: true, ToolCallParser: "hermes", ReasoningParser: "deepseek_r1"},
		Deps{Engines: client, Tokenizer: byteTok{}, Chat: simpleChat{},
			NewReasoning: func(*openai.Chat, string) (ReasoningParser, error) {
				return reasoning.New("deepseek_r1", reasoning.Options{})
			}})
	client.Start()
	env := &testEnv{t: t, eng: eng, client: client, srv: srv}
	env.http = newHTTPTest(t, srv)
	defer client.Close()
	const tools = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
	for _, iv := range []string{"1", "2", "7", "1000"} {
		_, raw := env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"weather?"}],`+tools+`,"max_tokens":200,"stream":true,"stream_interval":`+iv+`}`)
		var content, reason, name, args, id, finish string
		evs := sseEvents(t, raw)
		for _, e := range evs[:len(evs)-1] {
			var c toolChunk
			if err := json.Unmarshal([]byte(e), &c); err != nil {
				t.Fatal(err)
			}
			d := c.Choices[0].Delta
			if d.Content != nil {
				content += *d.Content
			}
			if d.Reasoning != nil {
				reason += *d.Reasoning
			}
			for _, tc := range d.ToolCalls {
				name += tc.Function.Name
				args += tc.Function.Arguments
				id += tc.ID
			}
			if c.Choices[0].FinishReason != nil {
				finish = *c.Choices[0].FinishReason
			}
		}
		if reason != "Let me check." || content != "Checking." || name != "get_weather" || !json.Valid([]byte(args)) ||
			!strings.Contains(args, "Paris") || !strings.HasPrefix(id, "chatcmpl-tool-") || finish != "tool_calls" {
			t.Fatalf("interval %s: reasoning %q content %q call %s(%s) id %q finish %q", iv, reason, content, name, args, id, finish)
		}
	}
	// non-streamed gives the same message
	_, raw := env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"weather?"}],`+tools+`,"max_tokens":200}`)
	var r struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				Reasoning *string `json:"reasoning"`
				ToolCalls []struct {
					Function struct{ Name, Arguments string } `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	m := r.Choices[0].Message
	if m.Content == nil || *m.Content != "Checking." || *m.Reasoning != "Let me check." || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "get_weather" || r.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("non-streamed: %s", raw)
	}
	// named tool_choice constrains the output to one hermes call, after
	// the reasoning (this fake engine ignores constraints: the ADD is
	// checked here, the parsing in structured_test.go)
	_, raw = env.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"weather?"}],`+tools+`,"tool_choice":{"type":"function","function":{"name":"get_weather"}},"max_tokens":3,"stream":true}`)
	if !strings.Contains(string(raw), `"finish_reason":"length"`) {
		t.Fatalf("named tool choice: %s", raw)
	}
	eng.mu.Lock()
	ct := eng.added[len(eng.added)-1].Params.Constraint
	eng.mu.Unlock()
	if ct == nil || ct.Kind != "grammar" || !ct.AfterReasoning || !strings.Contains(ct.Spec, `<tool_call>`) {
		t.Fatalf("named tool choice constraint: %+v", ct)
	}
}
