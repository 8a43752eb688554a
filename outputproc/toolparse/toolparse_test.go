package toolparse

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestNewUnknownName(t *testing.T) {
	_, err := New("nope", nil, nil)
	if err == nil {
		t.Fatal("New(nope) succeeded")
	}
	for _, n := range Names() {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not list %q", err, n)
		}
	}
	if _, _, err := ParseAll("nope", nil, "x"); err == nil {
		t.Error("ParseAll(nope) succeeded")
	}
}

func TestNamesAllConstruct(t *testing.T) {
	for _, n := range Names() {
		p, err := New(n, nil, nil)
		if err != nil || p == nil {
			t.Fatalf("New(%q) = %v, %v", n, p, err)
		}
		d := p.Add("hello")
		d2 := p.Finish()
		if d.Content+d2.Content != "hello" || p.Called() {
			t.Errorf("%s: plain text gave %q%q called=%v", n, d.Content, d2.Content, p.Called())
		}
	}
}

func TestDefaultIDs(t *testing.T) {
	_, calls, err := ParseAll("hermes", nil, `<tool_call>{"name":"a","arguments":{}}</tool_call><tool_call>{"name":"b","arguments":{}}</tool_call>`)
	if err != nil || len(calls) != 2 {
		t.Fatalf("calls %v err %v", calls, err)
	}
	if !strings.HasPrefix(calls[0].ID, "chatcmpl-tool-") || calls[0].ID == calls[1].ID || calls[0].Type != "function" {
		t.Errorf("ids %q %q type %q", calls[0].ID, calls[1].ID, calls[0].Type)
	}
}

// TestHoldback checks that prose is released at once except a tail that
// may still become markup.
func TestHoldback(t *testing.T) {
	tools := loadTools(t)
	tests := []struct {
		parser string
		steps  []string // text added
		want   []string // content released after each step
	}{
		{"hermes", []string{"Hello <b>", "x <tool_c", "ool> y"}, []string{"Hello <b>", "x ", "<tool_cool> y"}},
		{"hermes", []string{"a <", "tool_call", ">"}, []string{"a ", "", ""}},
		{"qwen3_coder", []string{"see <tool_ca", "lling>"}, []string{"see ", "<tool_calling>"}},
		{"mistral", []string{"ok [TOOL", "S] [1]", " [TOOL_CALLS"}, []string{"ok ", "[TOOLS] [1]", " "}},
		{"llama3_json", []string{"x <|python", "_ta", "g|"}, []string{"x ", "", ""}},
		{"llama3_json", []string{"x <|py", "thon> y"}, []string{"x ", "<|python> y"}},
		{"deepseek_v3", []string{"x <｜tool", "▁calls", " y"}, []string{"x ", "", "<｜tool▁calls y"}},
		{"pythonic", []string{"Hello", " [x]"}, []string{"Hello", " [x]"}},
		{"pythonic", []string{"[get_", "time(", ")]"}, []string{"", "", ""}},
	}
	for _, tt := range tests {
		p, err := New(tt.parser, tools, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range tt.steps {
			if got := p.Add(s).Content; got != tt.want[i] {
				t.Errorf("%s %q: step %d released %q, want %q", tt.parser, tt.steps, i, got, tt.want[i])
			}
		}
	}
}

// longArg is a string argument long enough to show progressive streaming.
var longArg = strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20)

// progressiveCases are calls with one long string argument, per parser.
var progressiveCases = map[string]string{
	"hermes":      `<tool_call>{"name": "write_file", "arguments": {"path": "a", "content": ` + mustJSON(longArg) + `}}</tool_call>`,
	"llama3_json": `<|python_tag|>{"name": "write_file", "parameters": {"path": "a", "content": ` + mustJSON(longArg) + `}}`,
	"mistral":     `[TOOL_CALLS]write_file[ARGS]{"path": "a", "content": ` + mustJSON(longArg) + `}`,
	"qwen3_coder": "<tool_call>\n<function=write_file>\n<parameter=path>\na\n</parameter>\n<parameter=content>\n" + longArg + "\n</parameter>\n</function>\n</tool_call>",
	"deepseek_v3": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>write_file\n```json\n{\"path\": \"a\", \"content\": " + mustJSON(longArg) + "}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
	"pythonic":    `[write_file(path="a", content="` + longArg + `")]`,
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestProgressiveArguments checks that a call's header goes out as soon as
// its name is known and that arguments stream while the model writes them.
func TestProgressiveArguments(t *testing.T) {
	tools := loadTools(t)
	for _, name := range Names() {
		text := progressiveCases[name]
		p, err := New(name, tools, nil)
		if err != nil {
			t.Fatal(err)
		}
		headerAt, argDeltas, args := -1, 0, ""
		fed := 0
		for _, piece := range chunks(text, 4) {
			fed += len(piece)
			d := p.Add(piece)
			if d.Content != "" {
				t.Fatalf("%s: content %q from a call", name, d.Content)
			}
			for _, tc := range d.ToolCalls {
				if tc.Name != "" && headerAt < 0 {
					headerAt = fed
				}
				if tc.Arguments != "" {
					argDeltas++
					args += tc.Arguments
				}
			}
		}
		d := p.Finish()
		for _, tc := range d.ToolCalls {
			args += tc.Arguments
		}
		if headerAt < 0 || headerAt > strings.Index(text, "write_file")+len("write_file")+30 {
			t.Errorf("%s: header sent after %d bytes", name, headerAt)
		}
		var got struct{ Path, Content string }
		if err := json.Unmarshal([]byte(args), &got); err != nil || got.Content != longArg || got.Path != "a" {
			t.Errorf("%s: arguments %q (%v)", name, args, err)
		}
		minDeltas := len(longArg) / 8 // most 4-byte pieces carry argument bytes
		if name == "pythonic" {
			minDeltas = 2 // one keyword argument at a time
		}
		if argDeltas < minDeltas {
			t.Errorf("%s: arguments came in %d deltas, want >= %d", name, argDeltas, minDeltas)
		}
	}
}

// TestQwen3CoderStringHoldback checks that a string value holds back only
// its possible trailing newline and a partial closing tag.
func TestQwen3CoderStringHoldback(t *testing.T) {
	p, err := New("qwen3_coder", loadTools(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var args string
	add := func(s string) {
		for _, tc := range p.Add(s).ToolCalls {
			args += tc.Arguments
		}
	}
	add("<tool_call>\n<function=write_file>\n<parameter=content>\nab\"c\n</para")
	if want := `{"content": "ab\"c`; args != want {
		t.Fatalf("after partial close: %q, want %q", args, want)
	}
	add("meter>\n</function>\n</tool_call>")
	if want := `{"content": "ab\"c"}`; args != want {
		t.Fatalf("after close: %q, want %q", args, want)
	}
}

// TestMalformedNeverPanics feeds odd inputs through every parser.
func TestMalformedNeverPanics(t *testing.T) {
	inputs := []string{
		"", "<", "<tool_call>", "<tool_call></tool_call>", "<tool_call>{}</tool_call>",
		`<tool_call>{"name": 5}</tool_call>`, `<tool_call>{"name": "get_time", "arguments": [}`,
		"[TOOL_CALLS]", "[TOOL_CALLS][", "[TOOL_CALLS]x[", "[TOOL_CALLS]get_time{", "[TOOL_CALLS][{]",
		"{", `{"name"`, "<|python_tag|>", "<|python_tag|>{;", "[", "[(", "[get_time(", "[get_time(a=", "[get_time(a==1)]",
		"<tool_call><function=", "<tool_call><function=get_time><parameter=", "<tool_call><function=get_time>junk",
		"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\nxx",
		"\xff\xfe<tool_call>\xff", "<|python_start|>", "<|python_start|>[get_time(a=b'x')]",
	}
	tools := loadTools(t)
	for _, name := range Names() {
		for _, in := range inputs {
			content, calls, err := ParseAll(name, tools, in)
			if err != nil {
				t.Fatal(err)
			}
			if len(calls) == 0 && content != in {
				t.Errorf("%s: %q without calls gave content %q", name, in, content)
			}
		}
	}
}
