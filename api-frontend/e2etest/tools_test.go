package e2etest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// toolCase is one scripted model answer and what a client must see.
type toolCase struct {
	name    string // also the prompt keyword the script matches
	output  string // the scripted model output
	content string // the expected content (no markup)
	calls   []wantCall
	finish  string
	max     int64 // max_tokens (0: 400)
}

type wantCall struct {
	name string
	args string // JSON, compared semantically; "" with raw set: compare verbatim
	raw  string // expected raw (incomplete) arguments of a truncated call
}

// hermesCases returns the scripted cases (fresh each call: the truncated
// case is completed from the server's tokenizer).
func hermesCases() []toolCase {
	return []toolCase{
		{
			name:    "TCPROSECALL",
			output:  "Let me check the weather for you.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
			content: "Let me check the weather for you.\n",
			calls:   []wantCall{{name: "get_weather", args: `{"city":"Paris","days":3}`}},
			finish:  "tool_calls",
		},
		{
			name:   "TCTWOCALLS",
			output: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
			calls:  []wantCall{{name: "get_weather", args: `{"city":"Oslo"}`}, {name: "get_time", args: `{}`}},
			finish: "tool_calls",
		},
		{
			name:   "TCCLOSETAG",
			output: "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.xml\", \"content\": \"<tool_call>x</tool_call> and \\\"quoted\\\" \\\\ back}\"}}\n</tool_call>",
			calls:  []wantCall{{name: "write_file", args: `{"path":"a.xml","content":"<tool_call>x</tool_call> and \"quoted\" \\ back}"}`}},
			finish: "tool_calls",
		},
		{
			name:   "TCUNICODE",
			output: "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"données/日本語.txt\", \"content\": \"naïve café — 🌧️ über \\u00e9\"}}\n</tool_call>",
			calls:  []wantCall{{name: "write_file", args: `{"path":"données/日本語.txt","content":"naïve café — 🌧️ über é"}`}},
			finish: "tool_calls",
		},
		{
			name:    "TCCALLPROSE",
			output:  "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\nI asked for the time; one moment.",
			content: "\nI asked for the time; one moment.",
			calls:   []wantCall{{name: "get_time", args: `{}`}},
			finish:  "tool_calls",
		},
		{
			// max_tokens ends the output inside the arguments: the committed
			// call keeps the raw arguments generated so far
			name:    "TCTRUNCATED",
			output:  "Writing it.\n<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"story.txt\", \"content\": \"Once upon a time there was a long story that never ended because the budget ran out",
			content: "Writing it.\n",
			calls:   []wantCall{{name: "write_file"}}, // raw filled in from the token budget below
			finish:  "length",
		},
	}
}

const proseAnswer = "Sunny and mild all week, with a light breeze in the afternoons."

func toolParams(t *testing.T) []openai.ChatCompletionToolUnionParam {
	t.Helper()
	obj := func(props string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(`{"type":"object","properties":`+props+`}`), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	return []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Parameters: obj(`{"city":{"type":"string"},"days":{"type":"integer"}}`)}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time", Parameters: obj(`{}`)}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "write_file", Parameters: obj(`{"path":{"type":"string"},"content":{"type":"string"}}`)}),
	}
}

// sameJSON reports whether a and b are equal JSON values.
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// TestToolsHermesScripted streams scripted hermes outputs (prose then a
// call, calls back to back, a closing tag inside a JSON string, Unicode
// arguments, a call then prose, truncation by max_tokens) through a
// frontend with --tool-call-parser hermes and reassembles them with
// openai-go's ChatCompletionAccumulator at stream intervals 1 and 5.
func TestToolsHermesScripted(t *testing.T) {
	dir := t.TempDir()
	toolCases := hermesCases()
	var script strings.Builder
	for _, c := range toolCases {
		line, _ := json.Marshal(map[string]string{"match": c.name, "output": c.output})
		script.Write(line)
		script.WriteByte('\n')
	}
	path := filepath.Join(dir, "tools.jsonl")
	if err := os.WriteFile(path, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := engineAddr(t)
	startEngine(t, addr, "--sim-script", path, "--sim-step-ms", "1")
	base, _ := startFrontend(t, addr, "--enable-auto-tool-choice", "--tool-call-parser", "hermes")
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	tools := toolParams(t)

	// the truncated case: stop 10 tokens before the end of the output and
	// expect the arguments to be the raw text after `"arguments": ` up to
	// there
	var tk struct {
		Tokens []int64 `json:"tokens"`
	}
	trunc := &toolCases[len(toolCases)-1]
	postJSON(t, base, "/tokenize", `{"prompt":`+mustJSON(t, trunc.output)+`,"add_special_tokens":false}`, &tk)
	cut := len(tk.Tokens) - 10
	trunc.max = int64(cut)
	var dt struct {
		Prompt string `json:"prompt"`
	}
	postJSON(t, base, "/detokenize", `{"tokens":`+mustJSON(t, tk.Tokens[:cut])+`}`, &dt)
	_, rawArgs, ok := strings.Cut(dt.Prompt, `"arguments": `)
	if !ok || len(rawArgs) < 20 {
		t.Fatalf("%d tokens of the truncated output %q do not reach far into the arguments", cut, dt.Prompt)
	}
	trunc.calls[0].raw = rawArgs

	for _, iv := range []int{1, 5} {
		for _, tc := range toolCases {
			t.Run(tc.name+"/interval"+string(rune('0'+iv)), func(t *testing.T) {
				maxTokens := tc.max
				if maxTokens == 0 {
					maxTokens = 400
				}
				s := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
					Model:     "demo",
					Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Please do " + tc.name + " now.")},
					Tools:     tools,
					MaxTokens: openai.Int(maxTokens),
				}, option.WithJSONSet("stream_interval", iv))
				var acc openai.ChatCompletionAccumulator
				chunks := 0
				for s.Next() {
					chunks++
					if !acc.AddChunk(s.Current()) {
						t.Fatalf("accumulator rejected chunk %d: %+v", chunks, s.Current())
					}
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
				if len(acc.Choices) != 1 {
					t.Fatalf("%d choices", len(acc.Choices))
				}
				ch := acc.Choices[0]
				msg := ch.Message
				if msg.Content != tc.content || strings.Contains(msg.Content, "tool_call") {
					t.Errorf("content %q, want %q", msg.Content, tc.content)
				}
				if ch.FinishReason != tc.finish {
					t.Errorf("finish_reason %q, want %q", ch.FinishReason, tc.finish)
				}
				if len(msg.ToolCalls) != len(tc.calls) {
					t.Fatalf("%d tool calls %+v, want %d", len(msg.ToolCalls), msg.ToolCalls, len(tc.calls))
				}
				var ids []string
				for i, got := range msg.ToolCalls {
					want := tc.calls[i]
					if got.Function.Name != want.name || got.Type != "function" || !strings.HasPrefix(got.ID, "chatcmpl-tool-") {
						t.Errorf("call %d: %+v, want name %s", i, got, want.name)
					}
					if want.raw != "" {
						if got.Function.Arguments != want.raw {
							t.Errorf("call %d: truncated arguments %q, want %q", i, got.Function.Arguments, want.raw)
						}
					} else if !sameJSON(got.Function.Arguments, want.args) {
						t.Errorf("call %d: arguments %s, want %s", i, got.Function.Arguments, want.args)
					}
					ids = append(ids, got.ID)
				}
				slices.Sort(ids)
				if len(slices.Compact(ids)) != len(tc.calls) {
					t.Errorf("tool call ids not unique: %v", ids)
				}
				t.Logf("%d chunks", chunks)
			})
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestToolsProseTTFT checks that the tool parser does not delay prose: with
// tools in the request, the first content chunk of a prose answer arrives
// within one engine step of where it arrives without tools.
func TestToolsProseTTFT(t *testing.T) {
	const step = 50 * time.Millisecond
	dir := t.TempDir()
	path := filepath.Join(dir, "prose.jsonl")
	if err := os.WriteFile(path, []byte(`{"match":"","output":`+mustJSON(t, proseAnswer)+`}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := engineAddr(t)
	startEngine(t, addr, "--sim-script", path, "--sim-step-ms", "50")
	base, _ := startFrontend(t, addr, "--enable-auto-tool-choice", "--tool-call-parser", "hermes")
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	tools := toolParams(t)

	ttft := func(withTools bool) time.Duration {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		p := openai.ChatCompletionNewParams{
			Model:     "demo",
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather like?")},
			MaxTokens: openai.Int(100),
		}
		if withTools {
			p.Tools = tools
		}
		t0 := time.Now()
		s := client.Chat.Completions.NewStreaming(ctx, p)
		defer s.Close()
		for s.Next() {
			c := s.Current()
			if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
				d := time.Since(t0)
				if !strings.HasPrefix(proseAnswer, c.Choices[0].Delta.Content) || len(c.Choices[0].Delta.ToolCalls) > 0 {
					t.Fatalf("first content %q", c.Choices[0].Delta.Content)
				}
				return d // cancel: the rest of the answer is not needed
			}
		}
		t.Fatalf("no content chunk (err %v)", s.Err())
		return 0
	}
	const n = 10
	var plain, withTools []time.Duration
	for range n {
		plain = append(plain, ttft(false))
		withTools = append(withTools, ttft(true))
	}
	median := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	mp, mt := median(plain), median(withTools)
	t.Logf("TTFT to first content over %d requests, --sim-step-ms 50: median without tools %v, with tools %v", n, mp, mt)
	t.Logf("without tools: %v", plain)
	t.Logf("with tools:    %v", withTools)
	if diff := (mt - mp).Abs(); diff >= step {
		t.Fatalf("median TTFT with tools %v vs without %v: differ by %v, at least one engine step (%v)", mt, mp, diff, step)
	}
}
