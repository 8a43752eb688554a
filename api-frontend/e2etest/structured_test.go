package e2etest

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sluice-llm/sluice/internal/testenv"
)

// personSchema is small enough for the 128-token context of aidreams260K.
const personSchema = `{"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":0,"maximum":120},"mood":{"enum":["calm","wild"]},"ok":{"type":"boolean"}},"required":["name","age","mood","ok"],"additionalProperties":false}`

// weatherParams is the tool schema of the tool_choice tests.
const weatherParams = `{"type":"object","properties":{"city":{"type":"string","maxLength":10},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"]}`

func compileSchema(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// validJSON checks text against s.
func validJSON(s *jsonschema.Schema, text string) error {
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

func schemaMap(t testing.TB, schema string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(schema), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// runJSONSchema sends n chat requests at temperature 1 with a json_schema
// response_format, 8 at a time (every fifth one streamed), and requires
// every answer to end with "stop" and validate against the schema.
func runJSONSchema(t *testing.T, client openai.Client, model string, n, maxTokens int, opts ...option.RequestOption) {
	t.Helper()
	for _, err := range jsonSchemaFailures(t, client, model, n, maxTokens, opts...) {
		t.Error(err)
	}
}

// jsonSchemaFailures sends the requests runJSONSchema sends and returns
// one error per answer that did not end with "stop" or did not validate.
func jsonSchemaFailures(t *testing.T, client openai.Client, model string, n, maxTokens int, opts ...option.RequestOption) []error {
	sch := compileSchema(t, personSchema)
	params := openai.ChatCompletionNewParams{
		Model:       model,
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Describe a person as JSON.")},
		MaxTokens:   openai.Int(int64(maxTokens)),
		Temperature: openai.Float(1),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Schema: schemaMap(t, personSchema), Strict: openai.Bool(true)},
		}},
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			p := params
			p.Seed = openai.Int(int64(i))
			var text, finish string
			if i%5 == 0 {
				s := client.Chat.Completions.NewStreaming(ctx, p, opts...)
				var acc openai.ChatCompletionAccumulator
				for s.Next() {
					acc.AddChunk(s.Current())
				}
				if err := s.Err(); err != nil {
					errs <- err
					return
				}
				text, finish = acc.Choices[0].Message.Content, acc.Choices[0].FinishReason
			} else {
				c, err := client.Chat.Completions.New(ctx, p, opts...)
				if err != nil {
					errs <- err
					return
				}
				text, finish = c.Choices[0].Message.Content, c.Choices[0].FinishReason
			}
			if finish != "stop" {
				errs <- errors.New("request " + strconv.Itoa(i) + ": finish_reason " + finish + ", output " + text)
				return
			}
			if err := validJSON(sch, text); err != nil {
				errs <- errors.New("request " + strconv.Itoa(i) + ": output " + text + ": " + err.Error())
				return
			}
			if i < 3 {
				t.Logf("request %d: %q", i, text)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

// TestStructuredDemo: response_format json_schema on the generated demo
// model with the real CPU executor gives schema-valid JSON every time, and
// an unsupported keyword is a 400 naming it.
func TestStructuredDemo(t *testing.T) {
	addr := engineAddr(t)
	startEngine(t, addr, "--executor", "cpu")
	base, _ := startFrontend(t, addr)
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	runJSONSchema(t, client, "demo", 50, 200)

	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "demo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "bad", Schema: schemaMap(t, `{"type":"array","items":{"type":"integer"},"uniqueItems":true}`)},
		}},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "response_format" || !strings.Contains(apiErr.Message, `unsupported JSON Schema keyword "uniqueItems"`) {
		t.Fatalf("unsupported keyword: %v", err)
	}
}

// TestStructuredAidreams: the same on the real trained aidreams260K
// checkpoint (llama2.c format, 512-token SentencePiece vocabulary). Its
// context is 128 tokens and it favours newlines. With the default
// whitespace (llama.cpp's: none before the value, a space or a newline and
// up to 20 spaces/tabs between tokens) at least 19 of 20 answers of at most
// 100 tokens must be valid (with the earlier grammar, up to 20 bytes of any
// whitespace on each side of every token and before the value, 0 of 20
// were); with vLLM's structured_outputs.disable_any_whitespace every one
// of 50 must be.
func TestStructuredAidreams(t *testing.T) {
	model := testenv.SharedFile(t, "aidreams260K/aidreams260K.bin")
	tok := testenv.SharedFile(t, "aidreams260K/tok512.bin")
	tmpl := filepath.Join(t.TempDir(), "chat.jinja")
	if err := os.WriteFile(tmpl, []byte("{% for m in messages %}{{ m['content'] }}\n{% endfor %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := engineAddr(t)
	start(t, "engine-core", "--model", model, "--tokenizer", tok, "--executor", "cpu", "--listen", addr, "--log-format", "console")
	base, _ := startFrontend(t, addr, "--model", model, "--tokenizer", tok, "--chat-template", tmpl, "--served-model-name", "aidreams")
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	t.Run("bounded", func(t *testing.T) {
		fails := jsonSchemaFailures(t, client, "aidreams", 20, 100)
		if len(fails) > 1 {
			t.Errorf("%d of 20 answers invalid with the default whitespace, want at most 1:", len(fails))
		}
		for _, err := range fails {
			t.Log(err)
		}
	})
	t.Run("compact", func(t *testing.T) {
		runJSONSchema(t, client, "aidreams", 50, 100, option.WithJSONSet("structured_outputs", map[string]any{"disable_any_whitespace": true}))
	})
}

// TestStructuredToolChoice: tool_choice required and named on the demo
// model with the hermes parser stream tool calls (reassembled by
// openai-go's accumulator) whose arguments validate against the tool's
// schema, with no markup in the content.
func TestStructuredToolChoice(t *testing.T) {
	addr := engineAddr(t)
	startEngine(t, addr, "--executor", "cpu")
	base, _ := startFrontend(t, addr, "--tool-call-parser", "hermes")
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	weather := compileSchema(t, weatherParams)
	const noArgs = `{"type":"object","properties":{},"additionalProperties":false}`
	empty := compileSchema(t, noArgs)
	tools := []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Parameters: schemaMap(t, weatherParams)}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time", Parameters: schemaMap(t, noArgs)}),
	}
	cases := []struct {
		name   string
		choice openai.ChatCompletionToolChoiceOptionUnionParam
		finish string
	}{
		{"required", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}, "tool_calls"},
		{"named", openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}), "stop"},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i := range 6 {
				s := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
					Model:       "demo",
					Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")},
					Tools:       tools,
					ToolChoice:  tc.choice,
					MaxTokens:   openai.Int(400),
					Temperature: openai.Float(1),
					Seed:        openai.Int(int64(i)),
				})
				var acc openai.ChatCompletionAccumulator
				for s.Next() {
					acc.AddChunk(s.Current())
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
				ch := acc.Choices[0]
				calls := ch.Message.ToolCalls
				if ch.FinishReason != tc.finish || ch.Message.Content != "" || len(calls) == 0 || (tc.name == "named" && len(calls) != 1) {
					t.Fatalf("run %d: finish %q content %q calls %+v", i, ch.FinishReason, ch.Message.Content, calls)
				}
				for _, c := range calls {
					v := map[string]*jsonschema.Schema{"get_weather": weather, "get_time": empty}[c.Function.Name]
					if v == nil || (tc.name == "named" && c.Function.Name != "get_weather") || !strings.HasPrefix(c.ID, "chatcmpl-tool-") {
						t.Fatalf("run %d: call %+v", i, c)
					}
					if err := validJSON(v, c.Function.Arguments); err != nil {
						t.Fatalf("run %d: %s(%s): %v", i, c.Function.Name, c.Function.Arguments, err)
					}
				}
			}
		})
	}
}
