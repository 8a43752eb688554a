package e2etest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/sluice-llm/sluice/internal/testenv"
)

// harmonyCases are scripted gpt-oss outputs in harmony format and what
// every API must make of them.
func harmonyCases() []agentCase {
	return []agentCase{
		{name: "HREASON", output: "<|channel|>analysis<|message|>User asks about weather; <b>reason</b> it through — café.<|end|><|start|>assistant<|channel|>final<|message|>It will be sunny, 21°C 🌞.<|return|>",
			reasoning: "User asks about weather; <b>reason</b> it through — café.", content: "It will be sunny, 21°C 🌞."},
		{name: "HFINAL", output: "<|channel|>final<|message|>Just the answer, with \"quotes\" and a back\\slash.<|return|>",
			content: "Just the answer, with \"quotes\" and a back\\slash."},
		{name: "HPROSE", output: "Plain prose that ignores the format, <b>tags</b> and 日本語.",
			content: "Plain prose that ignores the format, <b>tags</b> and 日本語."},
		{name: "HCALL", output: "<|channel|>analysis<|message|>I need the weather tool.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\", \"days\": 3}<|call|>",
			reasoning: "I need the weather tool.", calls: []wantCall{{name: "get_weather", args: `{"city":"Paris","days":3}`}}},
		{name: "HTWO", output: "<|channel|>analysis<|message|>Two tools.<|end|><|start|>assistant<|channel|>commentary<|message|>Checking both.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}<|end|><|start|>assistant to=functions.write_file<|channel|>commentary json<|message|>{\"path\": \"données/a.txt\", \"content\": \"<tool_call>x</tool_call> \\\"q\\\" \\\\\"}<|call|>",
			reasoning: "Two tools.", content: "Checking both.",
			calls: []wantCall{{name: "get_weather", args: `{"city":"Oslo"}`}, {name: "write_file", args: `{"path":"données/a.txt","content":"<tool_call>x</tool_call> \"q\" \\"}`}}},
	}
}

// harmonyTemplateMatch is how gpt-oss's template renders templateTool in
// the developer message (harmony's TypeScript-like namespace); the script
// answers templateAnswer only when the prompt holds it.
const (
	harmonyToolTurn = "<|start|>user<|message|>Please do HCALL now.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\", \"days\": 3}<|call|>" +
		"<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"21C\"<|end|><|start|>assistant"
	toolTurnAnswer       = "It is 21C in Paris."
	effortAnswer         = "Thinking hard."
	harmonyTemplateMatch = "<|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n// Get the weather\ntype get_weather = (_: {\ncity: string,\ndays?: number,\n}) => any;\n\n} // namespace functions<|end|>"
	templateAnswer       = "Rendered as harmony."
)

// startHarmonyServer serves the o200k_harmony tokenizer (o200k_base's ranks
// from ../shared) with gpt-oss's chat template, the harmony parsers and a
// script of harmony outputs; it returns the base URL.
func startHarmonyServer(t *testing.T) string {
	t.Helper()
	ranks := testenv.SharedFile(t, "tokenizers/o200k/o200k_base.json")
	tmpl, err := filepath.Abs("../../text/chattemplate/testdata/gpt-oss-20b.jinja")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var script strings.Builder
	// The tool-result turn also holds HCALL, so it is matched first.
	line, _ := json.Marshal(map[string]string{"match": harmonyToolTurn, "output": "<|channel|>final<|message|>" + toolTurnAnswer + "<|return|>"})
	script.Write(append(line, '\n'))
	for _, c := range harmonyCases() {
		line, _ := json.Marshal(map[string]string{"match": c.name, "output": c.output})
		script.Write(append(line, '\n'))
	}
	line, _ = json.Marshal(map[string]string{"match": "Reasoning: high\n\n# Valid channels", "output": "<|channel|>final<|message|>" + effortAnswer + "<|return|>"})
	script.Write(append(line, '\n'))
	line, _ = json.Marshal(map[string]string{"match": harmonyTemplateMatch, "output": "<|channel|>final<|message|>" + templateAnswer + "<|return|>"})
	script.Write(append(line, '\n'))
	path := filepath.Join(dir, "harmony.jsonl")
	if err := os.WriteFile(path, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	model := filepath.Dir(ranks)
	addr := engineAddr(t)
	startEngine(t, addr, "--model", model, "--tokenizer", "o200k_harmony", "--sim-script", path, "--sim-step-ms", "1")
	base, _ := startFrontend(t, addr, "--model", model, "--tokenizer", "o200k_harmony:"+ranks, "--served-model-name", "gpt-oss",
		"--chat-template", tmpl, "--enable-auto-tool-choice", "--tool-call-parser", "openai", "--reasoning-parser", "openai_gptoss",
		"--responses-store", filepath.Join(dir, "responses.db"))
	return base
}

// noMarkup fails when any harmony markup reached a client.
func noMarkup(t *testing.T, what string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		for _, tag := range []string{"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>", "<|call|>", "<|return|>", "to=functions", "<|"} {
			if strings.Contains(p, tag) {
				t.Errorf("%s: markup %q leaked in %q", what, tag, p)
			}
		}
	}
}

// chatHarmony is one chat completion read from raw chunks (reasoning is
// not in the SDK's types).
type chatHarmony struct {
	content, reasoning, finish string
	calls                      []wantCall
	ids                        []string
}

func harmonyChatTools() []openai.ChatCompletionToolUnionParam {
	obj := func(props string) shared.FunctionParameters {
		var p map[string]any
		_ = json.Unmarshal([]byte(props), &p)
		return shared.FunctionParameters(p)
	}
	return []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Description: openai.String("Get the weather"),
			Parameters: obj(`{"type":"object","required":["city"],"properties":{"city":{"type":"string"},"days":{"type":"integer"}}}`)}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "write_file", Description: openai.String("Write a file"),
			Parameters: obj(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}`)}),
	}
}

// TestHarmonyChatSDK drives /v1/chat/completions with openai-go against
// harmony output: analysis → reasoning, final → content, commentary to
// functions.NAME → tool calls with streamed arguments; streamed equals
// non-streamed at stream intervals 1 and 5, and no markup leaks. A request
// with tools must render them in harmony's namespace syntax.
func TestHarmonyChatSDK(t *testing.T) {
	base := startHarmonyServer(t)
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	onlyWeather := harmonyChatTools()[:1]
	for _, iv := range []int{1, 5} {
		for _, tc := range harmonyCases() {
			t.Run(fmt.Sprintf("%s/interval%d", tc.name, iv), func(t *testing.T) {
				params := openai.ChatCompletionNewParams{
					Model:     "gpt-oss",
					Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Please do " + tc.name + " now.")},
					Tools:     harmonyChatTools(),
					MaxTokens: openai.Int(400),
				}
				s := client.Chat.Completions.NewStreaming(ctx, params, option.WithJSONSet("stream_interval", iv))
				var got chatHarmony
				args := map[int64]*strings.Builder{}
				chunks := 0
				for s.Next() {
					chunks++
					var raw struct {
						Choices []struct {
							Delta struct {
								Content   string `json:"content"`
								Reasoning string `json:"reasoning"`
								ToolCalls []struct {
									Index    int64  `json:"index"`
									ID       string `json:"id"`
									Function struct {
										Name      string `json:"name"`
										Arguments string `json:"arguments"`
									} `json:"function"`
								} `json:"tool_calls"`
							} `json:"delta"`
							FinishReason string `json:"finish_reason"`
						} `json:"choices"`
					}
					if err := json.Unmarshal([]byte(s.Current().RawJSON()), &raw); err != nil {
						t.Fatal(err)
					}
					for _, c := range raw.Choices {
						got.content += c.Delta.Content
						got.reasoning += c.Delta.Reasoning
						if c.FinishReason != "" {
							got.finish = c.FinishReason
						}
						for _, tc := range c.Delta.ToolCalls {
							if tc.Function.Name != "" {
								got.calls = append(got.calls, wantCall{name: tc.Function.Name})
								got.ids = append(got.ids, tc.ID)
								args[tc.Index] = &strings.Builder{}
							}
							if args[tc.Index] == nil {
								t.Fatalf("arguments for call %d before its name", tc.Index)
							}
							args[tc.Index].WriteString(tc.Function.Arguments)
						}
					}
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
				for i := range got.calls {
					got.calls[i].args = args[int64(i)].String()
				}
				checkAgent(t, "streamed", tc, got.content, got.reasoning, got.calls)
				noMarkup(t, "streamed", got.content, got.reasoning)
				wantFinish := "stop"
				if len(tc.calls) > 0 {
					wantFinish = "tool_calls"
				}
				if got.finish != wantFinish {
					t.Errorf("finish_reason %q, want %q", got.finish, wantFinish)
				}
				for _, id := range got.ids {
					if !strings.HasPrefix(id, "chatcmpl-tool-") {
						t.Errorf("tool call id %q", id)
					}
				}
				if iv == 1 && tc.reasoning != "" && chunks < 4 {
					// A frontend that falls behind a 1 ms sim step merges
					// the tokens waiting for a stream into one chunk (as
					// vLLM's output collector does), so a loaded machine
					// can see few chunks; a frontend that buffers a
					// whole answer sees few every time.
					for try := 0; try < 4 && chunks < 4; try++ {
						chunks = countChunks(ctx, t, client, params, iv)
					}
					if chunks < 4 {
						t.Errorf("only %d chunks at stream interval 1 in 5 tries: not progressive", chunks)
					}
				}

				resp, err := client.Chat.Completions.New(ctx, params)
				if err != nil {
					t.Fatal(err)
				}
				var full struct {
					Choices []struct {
						Message struct {
							Content   *string `json:"content"`
							Reasoning string  `json:"reasoning"`
							ToolCalls []struct {
								Function struct {
									Name      string `json:"name"`
									Arguments string `json:"arguments"`
								} `json:"function"`
							} `json:"tool_calls"`
						} `json:"message"`
						FinishReason string `json:"finish_reason"`
					} `json:"choices"`
				}
				if err := json.Unmarshal([]byte(resp.RawJSON()), &full); err != nil {
					t.Fatal(err)
				}
				m := full.Choices[0].Message
				var content string
				if m.Content != nil {
					content = *m.Content
				}
				var calls []wantCall
				for i, c := range m.ToolCalls {
					calls = append(calls, wantCall{name: c.Function.Name, args: c.Function.Arguments})
					if c.Function.Arguments != got.calls[i].args {
						t.Errorf("non-streamed arguments %q differ from streamed %q", c.Function.Arguments, got.calls[i].args)
					}
				}
				checkAgent(t, "non-streamed", tc, content, m.Reasoning, calls)
				noMarkup(t, "non-streamed", content, m.Reasoning)
				if full.Choices[0].FinishReason != wantFinish {
					t.Errorf("non-streamed finish_reason %q, want %q", full.Choices[0].FinishReason, wantFinish)
				}
			})
		}
	}

	t.Run("template renders tools", func(t *testing.T) {
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:     "gpt-oss",
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather?")},
			Tools:     onlyWeather,
			MaxTokens: openai.Int(100),
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Choices[0].Message.Content; got != templateAnswer {
			t.Fatalf("content %q: the prompt did not hold the harmony rendering of the tools %q", got, harmonyTemplateMatch)
		}
	})

	t.Run("tool result turn", func(t *testing.T) {
		call := openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID: "call_1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city": "Paris", "days": 3}`}}}
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "gpt-oss",
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.UserMessage("Please do HCALL now."),
				{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{call}}},
				openai.ToolMessage("21C", "call_1"),
			},
			Tools:     harmonyChatTools(),
			MaxTokens: openai.Int(100),
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Choices[0].Message.Content; got != toolTurnAnswer {
			t.Fatalf("content %q: the prompt did not render the call and its result as harmony's %q", got, harmonyToolTurn)
		}
	})

	t.Run("reasoning_effort reaches the template", func(t *testing.T) {
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:           "gpt-oss",
			Messages:        []openai.ChatCompletionMessageParamUnion{openai.UserMessage("How hard do you think?")},
			ReasoningEffort: shared.ReasoningEffortHigh,
			MaxTokens:       openai.Int(100),
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Choices[0].Message.Content; got != effortAnswer {
			t.Fatalf("content %q: the system message did not say \"Reasoning: high\"", got)
		}
	})

	t.Run("completions constraint applies from the start", func(t *testing.T) {
		// A reasoning parser makes completions wait for the reasoning end
		// before constraining; harmony has no </think>, so it must not.
		resp, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model:     openai.CompletionNewParamsModel("gpt-oss"),
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Please do HFINAL now.")},
			MaxTokens: openai.Int(30),
		}, option.WithJSONSet("response_format", map[string]any{"type": "json_object"}))
		if err != nil {
			t.Fatal(err)
		}
		// Unconstrained, the script would give "finalJust the answer…".
		if got := resp.Choices[0].Text; !strings.HasPrefix(got, "{") || (resp.Choices[0].FinishReason == "stop" && !json.Valid([]byte(got))) {
			t.Errorf("text %q (finish %s) is not constrained JSON", got, resp.Choices[0].FinishReason)
		}
	})

	t.Run("completions keeps vLLM's raw text", func(t *testing.T) {
		resp, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model:     openai.CompletionNewParamsModel("gpt-oss"),
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Please do HFINAL now.")},
			MaxTokens: openai.Int(100),
		})
		if err != nil {
			t.Fatal(err)
		}
		// skip_special_tokens (default true) drops the markup tokens.
		if got, want := resp.Choices[0].Text, "finalJust the answer, with \"quotes\" and a back\\slash."; got != want {
			t.Errorf("text %q, want %q", got, want)
		}
	})
}

// TestHarmonyAgentSDKs drives /v1/responses (openai-go) and /v1/messages
// (anthropic-sdk-go) against the same harmony outputs, streamed and not,
// at stream intervals 1 and 5.
func TestHarmonyAgentSDKs(t *testing.T) {
	base := startHarmonyServer(t)
	oc := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ac := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
	ctx := context.Background()
	atools := []anthropic.ToolUnionParam{
		{OfTool: &anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}}}}},
		{OfTool: &anthropic.ToolParam{Name: "write_file", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}}}},
	}
	asplit := func(m *anthropic.Message) (content, reasoning string, calls []wantCall) {
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				content += b.Text
			case "thinking":
				reasoning += b.Thinking
			case "tool_use":
				calls = append(calls, wantCall{name: b.Name, args: string(b.Input)})
			}
		}
		return
	}
	for _, iv := range []int{1, 5} {
		for _, tc := range harmonyCases() {
			t.Run(fmt.Sprintf("responses/%s/interval%d", tc.name, iv), func(t *testing.T) {
				params := responses.ResponseNewParams{
					Model: "gpt-oss",
					Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Please do " + tc.name + " now.")},
					Tools: weatherTools(),
				}
				s := oc.Responses.NewStreaming(ctx, params, option.WithJSONSet("stream_interval", iv))
				var text, reason strings.Builder
				args := map[string]*strings.Builder{}
				var final respOut
				for s.Next() {
					ev := s.Current()
					switch ev.Type {
					case "response.output_text.delta":
						text.WriteString(ev.Delta)
					case "response.reasoning_text.delta":
						reason.WriteString(ev.Delta)
					case "response.function_call_arguments.delta":
						if args[ev.ItemID] == nil {
							args[ev.ItemID] = &strings.Builder{}
						}
						args[ev.ItemID].WriteString(ev.Delta)
					case "response.completed":
						if err := json.Unmarshal([]byte(ev.Response.RawJSON()), &final); err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
				content, reasoning, calls, _ := final.split()
				checkAgent(t, "completed event", tc, content, reasoning, calls)
				noMarkup(t, "responses stream", text.String(), reason.String())
				if text.String() != content || reason.String() != reasoning {
					t.Errorf("deltas %q / %q differ from the completed response %q / %q", text.String(), reason.String(), content, reasoning)
				}
				for _, it := range final.Output {
					if it.Type == "function_call" && (args[it.ID] == nil || args[it.ID].String() != it.Args) {
						t.Errorf("argument deltas of %s do not add up to %q", it.ID, it.Args)
					}
				}
				resp, err := oc.Responses.New(ctx, params)
				if err != nil {
					t.Fatal(err)
				}
				var got respOut
				if err := json.Unmarshal([]byte(resp.RawJSON()), &got); err != nil {
					t.Fatal(err)
				}
				c2, r2, calls2, _ := got.split()
				checkAgent(t, "non-streamed", tc, c2, r2, calls2)
				noMarkup(t, "responses", c2, r2)
			})
			t.Run(fmt.Sprintf("messages/%s/interval%d", tc.name, iv), func(t *testing.T) {
				params := anthropic.MessageNewParams{
					Model:     "gpt-oss",
					MaxTokens: 400,
					Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Please do " + tc.name + " now."))},
					Tools:     atools,
				}
				s := ac.Messages.NewStreaming(ctx, params, aoption.WithJSONSet("stream_interval", iv))
				var acc anthropic.Message
				for s.Next() {
					if err := acc.Accumulate(s.Current()); err != nil {
						t.Fatal(err)
					}
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
				c, r, calls := asplit(&acc)
				checkAgent(t, "streamed", tc, c, r, calls)
				noMarkup(t, "messages stream", c, r)
				wantStop := anthropic.StopReasonEndTurn
				if len(tc.calls) > 0 {
					wantStop = anthropic.StopReasonToolUse
				}
				if acc.StopReason != wantStop {
					t.Errorf("stop_reason %q, want %q", acc.StopReason, wantStop)
				}
				msg, err := ac.Messages.New(ctx, params)
				if err != nil {
					t.Fatal(err)
				}
				c2, r2, calls2 := asplit(msg)
				checkAgent(t, "non-streamed", tc, c2, r2, calls2)
				noMarkup(t, "messages", c2, r2)
			})
		}
	}
}

// countChunks streams params at stream interval iv and returns the number
// of chunks the client read.
func countChunks(ctx context.Context, t *testing.T, client openai.Client, params openai.ChatCompletionNewParams, iv int) int {
	t.Helper()
	s := client.Chat.Completions.NewStreaming(ctx, params, option.WithJSONSet("stream_interval", iv))
	n := 0
	for s.Next() {
		n++
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
