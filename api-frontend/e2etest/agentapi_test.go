package e2etest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// agentCase is one scripted model answer and what both agent APIs must
// return for it.
type agentCase struct {
	name      string // the prompt keyword the script matches
	output    string // the scripted model output (qwen3 reasoning, hermes calls)
	content   string
	reasoning string
	calls     []wantCall
}

func agentCases() []agentCase {
	return []agentCase{
		{name: "AGPROSE", output: "Plain prose with <b>tags</b>, \"quotes\", a back\\slash and unicode — café 🌧️ 日本語.",
			content: "Plain prose with <b>tags</b>, \"quotes\", a back\\slash and unicode — café 🌧️ 日本語."},
		{name: "AGREASON", output: "<think>\nThe user asks about weather; <b>reason</b> it through step by step.\n</think>\n\nIt will be sunny, 21°C.",
			reasoning: "\nThe user asks about weather; <b>reason</b> it through step by step.\n", content: "It will be sunny, 21°C."},
		{name: "AGCALL", output: "<think>\nI need a tool for this.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
			reasoning: "\nI need a tool for this.\n", content: "Let me check.\n", calls: []wantCall{{name: "get_weather", args: `{"city":"Paris","days":3}`}}},
		{name: "AGTWO", output: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"données/a.txt\", \"content\": \"<tool_call>x</tool_call> \\\"q\\\" \\\\\"}}\n</tool_call>",
			calls: []wantCall{{name: "get_weather", args: `{"city":"Oslo"}`}, {name: "write_file", args: `{"path":"données/a.txt","content":"<tool_call>x</tool_call> \"q\" \\"}`}}},
	}
}

// followUp answers the second turn of a tool conversation (its keyword
// comes back in the tool result, so it is matched first).
const followUp = "The weather in Paris is 21°C and sunny."

// startAgentServer starts engine-core with the agent script and the given
// frontend launcher arguments; it returns the base URL.
func startAgentServer(t *testing.T, extra ...string) string {
	t.Helper()
	dir := t.TempDir()
	var script strings.Builder
	line, _ := json.Marshal(map[string]string{"match": "AGFOLLOW", "output": followUp})
	script.Write(append(line, '\n'))
	for _, c := range agentCases() {
		line, _ := json.Marshal(map[string]string{"match": c.name, "output": c.output})
		script.Write(append(line, '\n'))
	}
	path := filepath.Join(dir, "agent.jsonl")
	if err := os.WriteFile(path, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := engineAddr(t)
	startEngine(t, addr, "--sim-script", path, "--sim-step-ms", "1")
	args := append([]string{"--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3",
		"--responses-store", filepath.Join(dir, "responses.db")}, extra...)
	base, _ := startFrontend(t, addr, args...)
	return base
}

func weatherTools() []responses.ToolUnionParam {
	obj := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}}}
	file := map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}}
	return []responses.ToolUnionParam{
		responses.ToolParamOfFunction("get_weather", obj, false),
		responses.ToolParamOfFunction("write_file", file, false),
	}
}

// respOut is a Responses object's output, read from its raw JSON.
type respOut struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Output []struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		CallID  string `json:"call_id"`
		Name    string `json:"name"`
		Args    string `json:"arguments"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		EncryptedContent string `json:"encrypted_content"`
	} `json:"output"`
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// split returns the object's text, reasoning and calls.
func (r *respOut) split() (content, reasoning string, calls []wantCall, ids []string) {
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			for _, p := range it.Content {
				content += p.Text
			}
		case "reasoning":
			for _, p := range it.Content {
				reasoning += p.Text
			}
		case "function_call":
			calls = append(calls, wantCall{name: it.Name, args: it.Args})
			ids = append(ids, it.CallID)
		}
	}
	return
}

func checkAgent(t *testing.T, what string, tc agentCase, content, reasoning string, calls []wantCall) {
	t.Helper()
	if content != tc.content {
		t.Errorf("%s: content %q, want %q", what, content, tc.content)
	}
	if reasoning != tc.reasoning {
		t.Errorf("%s: reasoning %q, want %q", what, reasoning, tc.reasoning)
	}
	if len(calls) != len(tc.calls) {
		t.Fatalf("%s: %d calls %+v, want %d", what, len(calls), calls, len(tc.calls))
	}
	for i, c := range calls {
		if c.name != tc.calls[i].name || !sameJSON(c.args, tc.calls[i].args) {
			t.Errorf("%s: call %d = %s(%s), want %s(%s)", what, i, c.name, c.args, tc.calls[i].name, tc.calls[i].args)
		}
	}
}

// TestResponsesSDK drives /v1/responses with openai-go's Responses client:
// streamed events (in order, strictly increasing sequence numbers) and a
// non-streamed call must both reassemble the scripted text, reasoning and
// tool calls exactly, at stream intervals 1 and 5; then a tool result goes
// back through previous_response_id.
func TestResponsesSDK(t *testing.T) {
	base := startAgentServer(t)
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	for _, iv := range []int{1, 5} {
		for _, tc := range agentCases() {
			t.Run(fmt.Sprintf("%s/interval%d", tc.name, iv), func(t *testing.T) {
				params := responses.ResponseNewParams{
					Model: "demo",
					Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Please do " + tc.name + " now.")},
					Tools: weatherTools(),
				}
				s := client.Responses.NewStreaming(ctx, params, option.WithJSONSet("stream_interval", iv))
				var seq int64 = -1
				var types []string
				var text, reason strings.Builder
				args := map[string]*strings.Builder{}
				var final respOut
				for s.Next() {
					ev := s.Current()
					if ev.SequenceNumber <= seq {
						t.Fatalf("sequence_number %d after %d", ev.SequenceNumber, seq)
					}
					seq = ev.SequenceNumber
					types = append(types, ev.Type)
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
				if len(types) < 3 || types[0] != "response.created" || types[1] != "response.in_progress" || types[len(types)-1] != "response.completed" {
					t.Fatalf("event order %v", types)
				}
				content, reasoning, calls, _ := final.split()
				checkAgent(t, "completed event", tc, content, reasoning, calls)
				if text.String() != content || reason.String() != reasoning {
					t.Errorf("deltas %q / %q differ from the completed response %q / %q", text.String(), reason.String(), content, reasoning)
				}
				for _, it := range final.Output {
					if it.Type == "function_call" && (args[it.ID] == nil || args[it.ID].String() != it.Args) {
						t.Errorf("argument deltas of %s do not add up to %q", it.ID, it.Args)
					}
				}

				resp, err := client.Responses.New(ctx, params)
				if err != nil {
					t.Fatal(err)
				}
				var got respOut
				if err := json.Unmarshal([]byte(resp.RawJSON()), &got); err != nil {
					t.Fatal(err)
				}
				c2, r2, calls2, _ := got.split()
				checkAgent(t, "non-streamed", tc, c2, r2, calls2)
				if got.Status != "completed" || !strings.HasPrefix(got.ID, "resp_") || got.Usage.TotalTokens != got.Usage.InputTokens+got.Usage.OutputTokens || got.Usage.OutputTokens == 0 {
					t.Errorf("status %q id %q usage %+v", got.Status, got.ID, got.Usage)
				}
			})
		}
	}

	t.Run("previous_response_id", func(t *testing.T) {
		first, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model: "demo",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Please do AGCALL now.")},
			Tools: weatherTools(),
		})
		if err != nil {
			t.Fatal(err)
		}
		var fo respOut
		_ = json.Unmarshal([]byte(first.RawJSON()), &fo)
		_, _, calls, ids := fo.split()
		if len(ids) != 1 || calls[0].name != "get_weather" {
			t.Fatalf("first turn calls %+v", calls)
		}
		second, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model:              "demo",
			PreviousResponseID: openai.String(first.ID),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfFunctionCallOutput(`{"temp_c": 21, "note": "AGFOLLOW"}`),
			}},
			Tools: weatherTools(),
		}, option.WithJSONSet("input.0.call_id", ids[0]))
		if err != nil {
			t.Fatal(err)
		}
		if second.OutputText() != followUp {
			t.Errorf("second turn %q, want %q", second.OutputText(), followUp)
		}
		got, err := client.Responses.Get(ctx, second.ID, responses.ResponseGetParams{})
		if err != nil || got.OutputText() != followUp {
			t.Fatalf("GET %s: %v %q", second.ID, err, got.OutputText())
		}
		if err := client.Responses.Delete(ctx, second.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Responses.Get(ctx, second.ID, responses.ResponseGetParams{}); err == nil || !strings.Contains(err.Error(), "404") {
			t.Fatalf("GET after DELETE: %v", err)
		}
		// An unknown call_id is a 400, not a 500.
		_, err = client.Responses.New(ctx, responses.ResponseNewParams{
			Model:              "demo",
			PreviousResponseID: openai.String(first.ID),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfFunctionCallOutput("x"),
			}},
		}, option.WithJSONSet("input.0.call_id", "call_nope"))
		if err == nil || !strings.Contains(err.Error(), "400") {
			t.Fatalf("unknown call_id: %v", err)
		}
	})
}

// TestMessagesSDK drives /v1/messages with Anthropic's Go SDK: the streamed
// events accumulated by the SDK (Message.Accumulate) and a non-streamed call
// must both give the scripted thinking, text and tool_use blocks, at stream
// intervals 1 and 5; then a tool_result turn, count_tokens, and errors in
// Anthropic's shape.
func TestMessagesSDK(t *testing.T) {
	base := startAgentServer(t, "--api-key", "sekret")
	client := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey("sekret"), aoption.WithMaxRetries(0))
	ctx := context.Background()
	tools := []anthropic.ToolUnionParam{
		{OfTool: &anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}}}}},
		{OfTool: &anthropic.ToolParam{Name: "write_file", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}}}},
	}
	split := func(m *anthropic.Message) (content, reasoning string, calls []wantCall, ids []string) {
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				content += b.Text
			case "thinking":
				reasoning += b.Thinking
				if b.Signature == "" {
					t.Errorf("thinking block without a signature")
				}
			case "tool_use":
				calls = append(calls, wantCall{name: b.Name, args: string(b.Input)})
				ids = append(ids, b.ID)
			}
		}
		return
	}
	for _, iv := range []int{1, 5} {
		for _, tc := range agentCases() {
			t.Run(fmt.Sprintf("%s/interval%d", tc.name, iv), func(t *testing.T) {
				params := anthropic.MessageNewParams{
					Model:     "claude-sonnet-4-5",
					MaxTokens: 32000, // far above the demo model's context: clamped
					Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Please do " + tc.name + " now."))},
					Tools:     tools,
				}
				s := client.Messages.NewStreaming(ctx, params, aoption.WithJSONSet("stream_interval", iv))
				var acc anthropic.Message
				for s.Next() {
					if err := acc.Accumulate(s.Current()); err != nil {
						t.Fatal(err)
					}
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
				c, r, calls, ids := split(&acc)
				checkAgent(t, "streamed", tc, c, r, calls)
				wantStop := anthropic.StopReasonEndTurn
				if len(tc.calls) > 0 {
					wantStop = anthropic.StopReasonToolUse
				}
				if acc.StopReason != wantStop || acc.Usage.OutputTokens == 0 {
					t.Errorf("stop_reason %q usage %+v", acc.StopReason, acc.Usage)
				}
				for _, id := range ids {
					if !strings.HasPrefix(id, "toolu_") {
						t.Errorf("tool_use id %q", id)
					}
				}
				// The SDK refuses a non-streamed call whose max_tokens could
				// run past 10 minutes; 4000 still exceeds the context.
				params.MaxTokens = 4000
				msg, err := client.Messages.New(ctx, params)
				if err != nil {
					t.Fatal(err)
				}
				c2, r2, calls2, _ := split(msg)
				checkAgent(t, "non-streamed", tc, c2, r2, calls2)
				if msg.StopReason != wantStop || !strings.HasPrefix(msg.ID, "msg_") || msg.Role != "assistant" {
					t.Errorf("message %s role %s stop %s", msg.ID, msg.Role, msg.StopReason)
				}
			})
		}
	}

	t.Run("tool_result", func(t *testing.T) {
		first, err := client.Messages.New(ctx, anthropic.MessageNewParams{
			Model: "demo", MaxTokens: 400, Tools: tools,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Please do AGCALL now."))},
		})
		if err != nil {
			t.Fatal(err)
		}
		var useID string
		var blocks []anthropic.ContentBlockParamUnion
		for _, b := range first.Content {
			blocks = append(blocks, b.ToParam())
			if b.Type == "tool_use" {
				useID = b.ID
			}
		}
		msgs := []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("Please do AGCALL now.")),
			anthropic.NewAssistantMessage(blocks...),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(useID, `{"temp_c": 21, "note": "AGFOLLOW"}`, false)),
		}
		second, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: "demo", MaxTokens: 400, Tools: tools, Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		if len(second.Content) != 1 || second.Content[0].Text != followUp || second.StopReason != anthropic.StopReasonEndTurn {
			t.Fatalf("second turn %+v", second.Content)
		}
		n, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "demo", Messages: msgs})
		if err != nil || n.InputTokens <= 0 {
			t.Fatalf("count_tokens %+v %v", n, err)
		}
		if second.Usage.InputTokens+second.Usage.CacheReadInputTokens != n.InputTokens {
			t.Errorf("count_tokens %d, the request used %d+%d", n.InputTokens, second.Usage.InputTokens, second.Usage.CacheReadInputTokens)
		}
		// A tool_result without its tool_use: Anthropic's error shape, 400.
		bad := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_missing", "x", true))}
		_, err = client.Messages.New(ctx, anthropic.MessageNewParams{Model: "demo", MaxTokens: 10, Messages: bad})
		var apiErr *anthropic.Error
		if err == nil || !asAnthropicError(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.RawJSON(), `"type":"invalid_request_error"`) {
			t.Fatalf("orphan tool_result: %v", err)
		}
	})

	t.Run("auth", func(t *testing.T) {
		bad := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey("wrong"), aoption.WithMaxRetries(0))
		_, err := bad.Messages.New(ctx, anthropic.MessageNewParams{Model: "demo", MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		var apiErr *anthropic.Error
		if err == nil || !asAnthropicError(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || !strings.Contains(apiErr.RawJSON(), "authentication_error") {
			t.Fatalf("wrong x-api-key: %v", err)
		}
	})
}

// TestResponsesAcrossFrontends chains previous_response_id over two
// frontends sharing one port (--api-server-count 2): every request opens a
// new connection, so SO_REUSEPORT spreads them, and each continues a
// response that the other frontend may have stored.
func TestResponsesAcrossFrontends(t *testing.T) {
	base := startAgentServer(t, "--api-server-count", "2")
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0), option.WithHTTPClient(hc))
	ctx := context.Background()
	pids := map[float64]bool{}
	prev := ""
	for i := range 12 {
		p := responses.ResponseNewParams{
			Model: "demo",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(fmt.Sprintf("Turn %d: please do AGPROSE now.", i))},
		}
		if prev != "" {
			p.PreviousResponseID = openai.String(prev)
		}
		resp, err := client.Responses.New(ctx, p)
		if err != nil {
			t.Fatalf("turn %d (previous %s): %v", i, prev, err)
		}
		if resp.OutputText() != agentCases()[0].content {
			t.Fatalf("turn %d: %q", i, resp.OutputText())
		}
		prev = resp.ID
		var v map[string]any
		r, err := hc.Get(base + "/version")
		if err != nil {
			t.Fatal(err)
		}
		_ = json.NewDecoder(r.Body).Decode(&v)
		r.Body.Close()
		pid, _ := v["pid"].(float64)
		pids[pid] = true
	}
	if len(pids) < 2 {
		t.Fatalf("all requests reached one frontend (pids %v)", pids)
	}
	// The last response holds the whole conversation: 12 user turns.
	got, err := client.Responses.Get(ctx, prev, responses.ResponseGetParams{})
	if err != nil || got.PreviousResponseID == "" {
		t.Fatalf("GET last: %v %+v", err, got)
	}
	if got.Usage.InputTokens < 12*10 {
		t.Errorf("the last turn's prompt has %d tokens: the history did not carry over", got.Usage.InputTokens)
	}
}
