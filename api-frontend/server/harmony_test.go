package server

import (
	"testing"

	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/outputproc"
	"github.com/sluice-llm/sluice/outputproc/toolparse"
)

// harmonyOut is a gpt-oss turn: reasoning, a preamble and a tool call.
const harmonyOut = "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary<|message|>Checking.<|end|>" +
	"<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}<|call|>"

// TestSetHarmonyOutput checks which halves of the harmony parser a choice
// gets for each parser configuration and tool_choice, by running one
// harmony turn through them in the output processor's order (reasoning,
// then tools).
func TestSetHarmonyOutput(t *testing.T) {
	tools := []toolparse.Tool{{Name: "get_weather"}}
	for _, tc := range []struct {
		name                        string
		reasoningParser, toolParser string
		mode                        string
		output                      openai.ToolOutput
		harmony                     bool
		reasoning, content          string
		calls                       int
	}{
		{name: "both, auto", reasoningParser: "openai_gptoss", toolParser: "openai", mode: "auto", harmony: true,
			reasoning: "Think.", content: "Checking.", calls: 1},
		{name: "both, none", reasoningParser: "openai_gptoss", toolParser: "openai", mode: "none", harmony: true,
			reasoning: "Think.", content: "Checking."},
		{name: "reasoning only", reasoningParser: "openai_gptoss", mode: "none", harmony: true,
			reasoning: "Think.", content: "Checking."},
		{name: "tools only drops reasoning", toolParser: "openai", mode: "auto", harmony: true,
			content: "Checking.", calls: 1},
		{name: "tools only, none: reasoning still dropped", toolParser: "openai", mode: "none", harmony: true,
			content: "Checking."},
		{name: "other parsers", reasoningParser: "qwen3", toolParser: "hermes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{cfg: Config{ReasoningParser: tc.reasoningParser, ToolCallParser: tc.toolParser}}
			if s.harmonyOutput() != tc.harmony {
				t.Fatalf("harmonyOutput %v, want %v", s.harmonyOutput(), tc.harmony)
			}
			if !tc.harmony {
				return
			}
			chat := &openai.Chat{ToolChoice: openai.ToolChoice{Mode: tc.mode}, ToolOutput: tc.output}
			var po outputproc.Options
			if e := s.setHarmonyOutput(&po, chat, tools, func() string { return "call_1" }); e != nil {
				t.Fatal(e)
			}
			if po.Reasoning == nil {
				t.Fatal("no reasoning parser: harmony's analysis channel would leak")
			}
			var reasoning, content string
			calls := 0
			feed := func(r, c string, last bool) {
				reasoning += r
				if po.Tools == nil {
					content += c
					return
				}
				d := po.Tools.Add(c)
				if last {
					d2 := po.Tools.Finish()
					d.Content += d2.Content
					d.ToolCalls = append(d.ToolCalls, d2.ToolCalls...)
				}
				content += d.Content
				for _, call := range d.ToolCalls {
					if call.Name != "" {
						calls++
					}
				}
			}
			for i := 0; i < len(harmonyOut); i += 7 {
				r, c := po.Reasoning.Add(harmonyOut[i:min(i+7, len(harmonyOut))])
				feed(r, c, false)
			}
			r, c := po.Reasoning.Finish()
			feed(r, c, true)
			if reasoning != tc.reasoning || content != tc.content || calls != tc.calls {
				t.Errorf("reasoning %q content %q calls %d; want %q %q %d", reasoning, content, calls, tc.reasoning, tc.content, tc.calls)
			}
		})
	}
}
