package openai

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sluice-llm/sluice/engine-core/guide"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/outputproc/toolparse"
)

// testTools: a schema with required and optional members, an empty
// object, and a tool without parameters (any object).
var testTools = []Tool{
	{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer","minimum":1,"maximum":7},"unit":{"enum":["c","f"]}},"required":["city"]}`)},
	{Name: "get_time", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
	{Name: "ping"},
}

// byteMatcher runs constraints over a byte-level vocabulary: id b < 256
// is byte b, 256 is EOS.
type byteMatcher struct {
	c *guide.Compiler
}

const testEOS = 256

func newByteMatcher(t testing.TB) *byteMatcher {
	toks := make([][]byte, 257)
	for i := range 256 {
		toks[i] = []byte{byte(i)}
	}
	toks[testEOS] = []byte("</s>")
	v, err := guide.NewVocab(toks, []int32{testEOS}, func(id int32) bool { return id == testEOS })
	if err != nil {
		t.Fatal(err)
	}
	return &byteMatcher{c: guide.NewCompiler(v, 64)}
}

// accepts reports whether text followed by EOS is a word of ct.
func (b *byteMatcher) accepts(t testing.TB, ct ipc.Constraint, text string) bool {
	m, err := b.c.Matcher(ct, time.Now().Add(10*time.Second))
	if err != nil {
		t.Fatalf("matcher: %v", err)
	}
	for i := 0; i < len(text); i++ {
		if m.Accept(int32(text[i])) != nil {
			return false
		}
	}
	return m.Accept(testEOS) == nil && m.IsDone()
}

// sample draws one output under ct at random (biased towards closing
// characters so outputs stay short); ok is false past maxLen bytes.
func (b *byteMatcher) sample(t testing.TB, ct ipc.Constraint, rng *rand.Rand, maxLen int) (string, bool) {
	m, err := b.c.Matcher(ct, time.Now().Add(10*time.Second))
	if err != nil {
		t.Fatalf("matcher: %v", err)
	}
	mask := guide.NewBitmask(257)
	var out []byte
	var all, closers []int32
	for len(out) < maxLen {
		m.Mask(mask)
		all, closers = all[:0], closers[:0]
		for id := int32(0); id < 257; id++ {
			if !mask.Allowed(id) {
				continue
			}
			all = append(all, id)
			if id == testEOS || id == '"' || id == '}' || id == ']' || id == '<' {
				closers = append(closers, id)
			}
		}
		if len(all) == 0 {
			t.Fatalf("dead end after %q", out)
		}
		pick := all[rng.IntN(len(all))]
		if len(closers) > 0 && rng.IntN(3) == 0 {
			pick = closers[rng.IntN(len(closers))]
		}
		if err := m.Accept(pick); err != nil {
			t.Fatalf("accept %d after %q: %v", pick, out, err)
		}
		if pick == testEOS {
			return string(out), true
		}
		out = append(out, byte(pick))
	}
	return string(out), false
}

func schemaValidator(t testing.TB, schema json.RawMessage) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(paramsSchema(schema))))
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

// parseToolOutput reads constrained output the way the server does.
func parseToolOutput(t testing.TB, parser string, out ToolOutput, name, text string) (string, []toolparse.ToolCall) {
	t.Helper()
	var tools []toolparse.Tool
	for _, tt := range testTools {
		tools = append(tools, toolparse.Tool{Name: tt.Name, Parameters: tt.Parameters})
	}
	switch out {
	case ToolOutputArguments:
		return "", []toolparse.ToolCall{{Name: name, Arguments: text}}
	case ToolOutputJSONArray:
		parser, text = "mistral", "[TOOL_CALLS]"+text
	}
	content, calls, err := toolparse.ParseAll(parser, tools, text)
	if err != nil {
		t.Fatal(err)
	}
	return content, calls
}

// TestToolConstraint builds required and named grammars for every parser,
// checks hand-written outputs, and samples random outputs under each: the
// parser must read them as calls (no markup left in content) to the
// allowed functions, with arguments valid against the tool's schema.
func TestToolConstraint(t *testing.T) {
	bm := newByteMatcher(t)
	validators := map[string]*jsonschema.Schema{}
	for _, tt := range testTools {
		validators[tt.Name] = schemaValidator(t, tt.Parameters)
	}
	one := map[string]string{
		"hermes":      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>",
		"llama3_json": `{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}`,
		"mistral":     `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}]`,
		"deepseek_v3": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\", \"days\": 2}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		"":            `[{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}]`,
	}
	two := map[string]string{
		"hermes":      one["hermes"] + "\n<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>",
		"llama3_json": one["llama3_json"] + `; {"name": "ping", "parameters": {}}`,
		"mistral":     `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "ping", "arguments": {}}]`,
		"deepseek_v3": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>ping\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		"":            `[{"name": "get_weather", "parameters": {"city": "Paris"}}, {"name": "ping", "parameters": {}}]`,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, parser := range []string{"hermes", "llama3_json", "mistral", "deepseek_v3", "qwen3_coder", "pythonic", ""} {
		format := parser
		if _, ok := one[parser]; !ok {
			format = "" // falls back to the generic array
		}
		for _, mode := range []string{"required", "single", "named"} {
			t.Run(parser+"/"+mode, func(t *testing.T) {
				choice := ToolChoice{Mode: "required"}
				if mode == "named" {
					choice = ToolChoice{Mode: "named", Name: "get_weather"}
				}
				ct, out, err := ToolConstraint(parser, testTools, choice, mode == "required")
				if err != nil {
					t.Fatal(err)
				}
				wantOut := ToolOutputParser
				switch {
				case format == "" && mode == "named":
					wantOut = ToolOutputArguments
				case format == "":
					wantOut = ToolOutputJSONArray
				}
				if out != wantOut {
					t.Fatalf("output mode %d, want %d", out, wantOut)
				}
				// Hand-written outputs.
				if out == ToolOutputArguments {
					if !bm.accepts(t, ct, `{"city": "Paris", "days": 2}`) || bm.accepts(t, ct, `{"days": 2}`) {
						t.Fatal("arguments grammar accepts the wrong things")
					}
				} else {
					if !bm.accepts(t, ct, one[format]) {
						t.Fatalf("rejects one call %q", one[format])
					}
					if got := bm.accepts(t, ct, two[format]); got != (mode == "required") {
						t.Fatalf("two calls accepted = %v in mode %s", got, mode)
					}
					bad := strings.Replace(one[format], "get_weather", "get_wether", 1)
					if bm.accepts(t, ct, bad) {
						t.Fatal("accepts an unknown function")
					}
					bad = strings.Replace(one[format], `"days": 2`, `"days": 9`, 1)
					if bm.accepts(t, ct, bad) {
						t.Fatal("accepts arguments outside the schema")
					}
				}
				// Random outputs.
				done := 0
				for range 25 {
					text, ok := bm.sample(t, ct, rng, 3000)
					if !ok {
						continue
					}
					done++
					content, calls := parseToolOutput(t, parser, out, choice.Name, text)
					if content != "" || len(calls) == 0 || (mode != "required" && len(calls) != 1) {
						t.Fatalf("output %q: content %q, %d calls", text, content, len(calls))
					}
					for _, c := range calls {
						v := validators[c.Name]
						if v == nil || (mode == "named" && c.Name != "get_weather") {
							t.Fatalf("output %q: call to %q", text, c.Name)
						}
						inst, err := jsonschema.UnmarshalJSON(strings.NewReader(c.Arguments))
						if err != nil {
							t.Fatalf("output %q: arguments %q: %v", text, c.Arguments, err)
						}
						if err := v.Validate(inst); err != nil {
							t.Fatalf("output %q: arguments %q: %v", text, c.Arguments, err)
						}
					}
				}
				if done < 15 {
					t.Fatalf("only %d of 25 samples ended", done)
				}
			})
		}
	}
}

// TestToolGrammarGolden pins the hermes grammar text.
func TestToolGrammarGolden(t *testing.T) {
	text, err := toolGrammar("hermes", testTools[:2], true)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "toolgrammar_hermes.lark")
	if *update {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if text != string(want) {
		t.Fatalf("grammar changed:\n%s", text)
	}
}

// TestToolConstraintErrors: choices that constrain nothing or name no tool.
func TestToolConstraintErrors(t *testing.T) {
	if _, _, err := ToolConstraint("hermes", testTools, ToolChoice{Mode: "auto"}, true); err == nil {
		t.Fatal("auto gave a constraint")
	}
	if _, _, err := ToolConstraint("hermes", testTools, ToolChoice{Mode: "named", Name: "nope"}, true); err == nil {
		t.Fatal("unknown name gave a constraint")
	}
}

// FuzzToolConstraint: arbitrary tool names and schemas give a grammar or
// an error, never a panic, and a grammar always compiles in the engine.
func FuzzToolConstraint(f *testing.F) {
	f.Add("get_weather", `{"type":"object","properties":{"a":{"type":"string"}}}`, "hermes", true)
	f.Add(`we"ird/\n`, `{"type":"object","properties":{"p":{"pattern":"a/b"}}}`, "deepseek_v3", false)
	f.Add("x", `{"type":"integer"}`, "mistral", true)
	bm := newByteMatcher(f)
	f.Fuzz(func(t *testing.T, name, schema, parser string, named bool) {
		if name == "" {
			return
		}
		choice := ToolChoice{Mode: "required"}
		if named {
			choice = ToolChoice{Mode: "named", Name: name}
		}
		ct, _, err := ToolConstraint(parser, []Tool{{Name: name, Parameters: json.RawMessage(schema)}}, choice, true)
		if err != nil {
			return
		}
		if _, err := bm.c.Matcher(ct, time.Now().Add(10*time.Second)); err != nil {
			t.Fatalf("grammar does not compile: %v", err)
		}
	})
}
