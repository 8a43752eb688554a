package chattemplate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nikolalohinski/gonja/v2/exec"
	"go.uber.org/goleak"
)

func msgs(js ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(js))
	for i, s := range js {
		out[i] = json.RawMessage(s)
	}
	return out
}

func mustRender(t *testing.T, src string, in Input) string {
	t.Helper()
	tpl, err := New(src)
	if err != nil {
		t.Fatalf("New(%q): %v", src, err)
	}
	out, err := tpl.Render(in)
	if err != nil {
		t.Fatalf("Render(%q): %v", src, err)
	}
	return out
}

func TestRender(t *testing.T) {
	user := msgs(`{"role":"user","content":"hi"}`)
	tests := []struct {
		name string
		src  string
		in   Input
		want string
	}{
		{"parenthesized inline if", `{{ ('b' if messages else 'c') }}`, Input{Messages: user}, "b"},
		{"parenthesized inline if false", `{{ ('b' if not messages else 'c') }}`, Input{Messages: user}, "c"},
		{"inline if without else", `[{{ ('b' if false) }}]`, Input{Messages: user}, "[]"},
		{"nested inline if", `{{ ('a' if false else ('b' if true else 'c')) }}`, Input{}, "b"},
		{"chained inline if", `{{ ('a' if false else 'b' if false else 'c') }}`, Input{}, "c"},
		{"inline if in call argument", `{{ "x".startswith('x' if true else 'y') }}`, Input{}, "True"},
		{"inline if in kwarg", `{{ [1,2] | tojson(indent=(2 if true else none)) }}`, Input{}, "[\n  1,\n  2\n]"},
		{"inline if is lazy", `{{ (messages[5].content.strip() if messages | length > 5 else 'short') }}`, Input{Messages: user}, "short"},
		{"inline if in string untouched", `{{ "(a if b else c)" }}`, Input{}, "(a if b else c)"},
		{"negative index equal to length", `{{ messages[-1].content }}{{ [7][-1] }}`, Input{Messages: user}, "hi7"},
		{"escaped backslash literal", `{{ '\\' }}|{{ "a\
b" }}|{{ '\u00e9\x41\n' }}`, Input{}, "\\|ab|éA\n"},
		{"str methods", `{{ '  a b  '.strip() }}|{{ ' a '.lstrip() }}|{{ ' a '.rstrip() }}|{{ 'xxaxx'.strip('x') }}|{{ ' a  b '.split() | join(',') }}|{{ 'a:b:c'.rsplit(':', 1) | join(',') }}|{{ 'a b c'.split(none, 1) | join(',') }}|{{ 'q?'.endswith(('!', '?')) }}`,
			Input{}, "a b|a | a|a|a,b|a:b,c|a,b c|True"},
		{"trim_blocks", "{% if true %}\nX\n{% endif %}\nY", Input{}, "X\nY"},
		{"lstrip_blocks", "  {% if true %}\nX\n  {% endif %}", Input{}, "X\n"},
		{"loop controls", `{% for i in [1,2,3,4] %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}`, Input{}, "13"},
		{"tojson compact HF separators", `{{ {"b": 1, "a": [true, none, "é"]} | tojson }}`, Input{}, `{"b": 1, "a": [true, null, "é"]}`},
		{"tojson ensure_ascii", `{{ "é🙂" | tojson(ensure_ascii=true) }}`, Input{}, `"\u00e9\ud83d\ude42"`},
		{"tojson separators", `{{ {"a": [1, 2]} | tojson(separators=(',', ':')) }}`, Input{}, `{"a":[1,2]}`},
		{"tojson indent string", `{{ {"a": [1, {}], "b": []} | tojson(indent='\t') }}`, Input{}, "{\n\t\"a\": [\n\t\t1,\n\t\t{}\n\t],\n\t\"b\": []\n}"},
		{"tojson no html escaping", `{{ "<a href='x'>&</a>" | tojson }}`, Input{}, `"<a href='x'>&</a>"`},
		{"kwargs visible", `{{ enable_thinking }} {{ budget }}`, Input{Kwargs: map[string]any{"enable_thinking": false, "budget": float64(128)}}, "False 128"},
		{"kwargs cannot replace messages", `{{ messages | length }}`, Input{Messages: user, Kwargs: map[string]any{"messages": []any{}}}, "1"},
		{"strftime_now", `{{ strftime_now('%Y-%m-%d %a') }}`, Input{Now: time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)}, "2026-03-04 Wed"},
		{"content parts flattened", `{{ messages[0].content }}`, Input{Messages: msgs(`{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`)}, "a\nb"},
		{"null content is empty", `[{{ messages[0].content }}]`, Input{Messages: msgs(`{"role":"assistant","content":null}`)}, "[]"},
		{"tool call arguments parsed in order", `{{ messages[0].tool_calls[0].function.arguments | tojson }}`, Input{Messages: msgs(`{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{\"z\": 1, \"a\": 2}"}}]}`)}, `{"z": 1, "a": 2}`},
		{"dict items ordered", `{% for k, v in tools[0].function.parameters.items() %}{{ k }}{% endfor %}`, Input{Tools: msgs(`{"type":"function","function":{"name":"f","parameters":{"z":1,"y":2,"a":3}}}`)}, "zya"},
		{"items filter ordered", `{% for k, v in tools[0].function.parameters | items %}{{ k }}{{ v }}{% endfor %}`, Input{Tools: msgs(`{"type":"function","function":{"name":"f","parameters":{"z":1,"y":2,"a":3}}}`)}, "z1y2a3"},
		{"dictsort filter", `{% for k, v in tools[0].function.parameters | dictsort %}{{ k }}{% endfor %}|{% for k, v in tools[0].function.parameters | dictsort(by='value', reverse=true) %}{{ k }}{% endfor %}`, Input{Tools: msgs(`{"type":"function","function":{"name":"f","parameters":{"z":1,"B":3,"a":2}}}`)}, "aBz|Baz"},
		{"tools none when absent", `{{ tools is none }}`, Input{}, "True"},
		{"special tokens", `{{ bos_token }}|{{ eos_token }}`, Input{BOSToken: "<s>", EOSToken: "</s>"}, "<s>|</s>"},
		{"continue final message", `{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}`,
			Input{Messages: msgs(`{"role":"user","content":"q"}`, `{"role":"assistant","content":"The answer is "}`), ContinueFinalMessage: true}, "<user>q</user><assistant>The answer is "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustRender(t, tc.src, tc.in); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRewriteInlineIfs(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{{ ('b' if x else 'c') }}`, `{{ ((( x ) and ['b' ] or [ 'c'])|first) }}`},
		{`{{ a if b else c }}`, `{{ a if b else c }}`},
		{`{% for x in xs if x %}`, `{% for x in xs if x %}`},
		{`{{ f(k=1 if a else 2) }}`, `{{ f(k=(( a ) and [1 ] or [ 2])|first) }}`},
		{`{{ x[1:] }}`, `{{ x[1:] }}`},
		{`{# (a if b else c) #}text (a if b else c)`, `{# (a if b else c) #}text (a if b else c)`},
		{`{% raw %}{{ (a if b else c) }}{% endraw %}`, `{% raw %}{{ (a if b else c) }}{% endraw %}`},
		{`{{ ("}}" if a else "x") }}`, `{{ ((( a ) and ["}}" ] or [ "x"])|first) }}`},
		{`{{ (elif_x) }}`, `{{ (elif_x) }}`},
		{`{{ x[-1] }}{{ x.split('a')[ -2 ] }}`, `{{ x[-1:][0] }}{{ x.split('a')[ -2 :][0] }}`},
		{`{{ [-1] }}{{ 1 in [-1] }}{{ x[-1:] }}`, `{{ [-1] }}{{ 1 in [-1] }}{{ x[-1:] }}`},
	}
	for _, tc := range tests {
		if got := rewriteInlineIfs(tc.in); got != tc.want {
			t.Errorf("rewriteInlineIfs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// The rewrite is needed: gonja rejects the original form.
	if _, err := New(`{{ ('b' if true else 'c') }}`); err != nil {
		t.Fatalf("rewritten template must parse: %v", err)
	}
}

func TestPyFloatRepr(t *testing.T) {
	// Values and Python's repr(float) of them.
	tests := map[float64]string{
		1: "1.0", 0.1: "0.1", 1e-05: "1e-05", 0.0001: "0.0001", 1e16: "1e+16", 1e15: "1000000000000000.0",
		123456789012345678: "1.2345678901234568e+17", 1.5e300: "1.5e+300", -2.5e-7: "-2.5e-07",
		3.141592653589793: "3.141592653589793", 100: "100.0", 0: "0.0", 1e22: "1e+22", 12345.678: "12345.678",
	}
	for f, want := range tests {
		if got := pyFloatRepr(f); got != want {
			t.Errorf("pyFloatRepr(%v) = %q, want %q", f, got, want)
		}
	}
}

func TestErrors(t *testing.T) {
	var te *Error
	_, err := New(`{% if %}` + strings.Repeat("x", 100))
	if !errors.As(err, &te) {
		t.Fatalf("syntax error not a *Error: %v", err)
	}
	if strings.Contains(te.Message, "xxxxx") {
		t.Errorf("parse error repeats the template source: %s", te.Message)
	}
	t.Logf("parse error: %s", te.Message)

	tpl, err := New(`{{ raise_exception('bad roles') }}`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tpl.Render(Input{})
	if !errors.As(err, &te) || !te.Raised || te.Message != "bad roles" {
		t.Fatalf("raise_exception: got %#v", err)
	}

	tpl, err = New(`{{ messages }}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"content":"no role"}`, `[1]`, `{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}`,
		`{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{not json"}}]}`} {
		if _, err := tpl.Render(Input{Messages: msgs(bad)}); !errors.As(err, &te) {
			t.Errorf("message %s: want *Error, got %v", bad, err)
		}
	}
	if _, err := tpl.Render(Input{AddGenerationPrompt: true, ContinueFinalMessage: true}); !errors.As(err, &te) {
		t.Errorf("add_generation_prompt with continue_final_message: want *Error, got %v", err)
	}

	// Unbounded macro recursion is an error, not a crash.
	tpl, err = New(`{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tpl.Render(Input{}); !errors.As(err, &te) {
		t.Errorf("recursive macro: want *Error, got %v", err)
	}
	// Loading other templates is not possible.
	if tpl, err := New(`{% include '/etc/passwd' %}`); err == nil {
		if out, err := tpl.Render(Input{}); err == nil {
			t.Errorf("include rendered %q", out)
		}
	}
}

func TestPickAndLoad(t *testing.T) {
	set := map[string]string{DefaultName: "D", ToolUseName: "T", "rag": "R"}
	cases := []struct {
		name     string
		hasTools bool
		want     string
		wantErr  bool
	}{
		{"", false, "D", false},
		{"", true, "T", false},
		{"rag", true, "R", false},
		{"missing", false, "", true},
	}
	for _, c := range cases {
		got, err := Pick(set, c.name, c.hasTools)
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("Pick(%q, %v) = %q, %v", c.name, c.hasTools, got, err)
		}
	}
	if got, err := Pick(map[string]string{"only": "O"}, "", false); err != nil || got != "O" {
		t.Errorf("single template: %q, %v", got, err)
	}
	if _, err := Pick(nil, "", false); err == nil {
		t.Error("no templates: want error")
	}

	dir := t.TempDir()
	raw := filepath.Join(dir, "t.jinja")
	if err := os.WriteFile(raw, []byte("{{ messages }}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := Load(raw); err != nil || m[DefaultName] != "{{ messages }}" {
		t.Errorf("Load raw: %v %v", m, err)
	}
	js := filepath.Join(dir, "t.json")
	if err := os.WriteFile(js, []byte(`{"chat_template":[{"name":"default","template":"A"},{"name":"tool_use","template":"B"}],"bos_token":{"content":"<s>"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := Load(js); err != nil || m[DefaultName] != "A" || m[ToolUseName] != "B" {
		t.Errorf("Load json: %v %v", m, err)
	}
	cfg, err := ParseTokenizerConfig([]byte(`{"chat_template":"X","bos_token":{"content":"<s>"},"eos_token":"</s>"}`))
	if err != nil || cfg.Templates[DefaultName] != "X" || cfg.BOSToken != "<s>" || cfg.EOSToken != "</s>" {
		t.Errorf("ParseTokenizerConfig: %+v %v", cfg, err)
	}
	other := filepath.Join(dir, "other.json")
	if err := os.WriteFile(other, []byte(`{"model_type": "llama"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(other); err == nil {
		t.Error("Load of a JSON file without chat_template: want error")
	}
	if _, err := Load(filepath.Join(dir, "absent")); err == nil {
		t.Error("Load of a missing file: want error")
	}
}

func TestConcurrentRender(t *testing.T) {
	tpl, err := New(`{%- set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ m.content }}{% endfor %}{{ ns.n }}`)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			content := strings.Repeat("x", i)
			m, _ := json.Marshal(map[string]string{"role": "user", "content": content})
			for range 50 {
				out, err := tpl.Render(Input{Messages: []json.RawMessage{m, m}})
				if err != nil || out != content+content+"2" {
					t.Errorf("got %q, %v", out, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestFromJSONKeepsOrderAndTypes(t *testing.T) {
	v, err := fromJSON([]byte(`{"b": 1, "a": 1.0, "c": [1e2, "x", null, false], "b": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	d := v.(*exec.Dict)
	s, err := pyDumps(d, defaultJSONOptions())
	if err != nil {
		t.Fatal(err)
	}
	// Python: json.dumps(json.loads(...)) keeps the first position of a
	// repeated key with the last value, and 1.0 / 1e2 stay floats.
	if want := `{"b": 2, "a": 1.0, "c": [100.0, "x", null, false]}`; s != want {
		t.Errorf("got %s, want %s", s, want)
	}
	for _, bad := range []string{`{`, `{"a":1} x`, `{1:2}`} {
		if _, err := fromJSON([]byte(bad)); err == nil {
			t.Errorf("fromJSON(%q): want error", bad)
		}
	}
}

// FuzzRender checks that parsing and rendering arbitrary templates never
// panics and that every failure is a *Error.
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		`{{ messages[0].content }}`,
		`{{ ('b' if x else 'c') }}`,
		`{% for m in messages[::-1] %}{{ m.role | tojson(indent=2) }}{% endfor %}`,
		`{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}`,
		`{{ raise_exception('x') }}`,
		`{% set ns = namespace(a=1) %}{% set ns.a = ns.a + 1 %}{{ ns.a }}`,
		`{% set ns = namespace(a=1) %}{% set ns.a = [ns] %}{{ ns }}`,
		`{{ tools | tojson }}{{ strftime_now('%d %b %Y') }}`,
		`{{ messages[-1].content.split()[-1] }}{{ '\\' ~ "a\
b\u00e9" }}`,
	} {
		f.Add(s)
	}
	in := Input{
		Messages:            msgs(`{"role":"system","content":"s"}`, `{"role":"user","content":"u"}`, `{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}`),
		Tools:               msgs(`{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}`),
		AddGenerationPrompt: true,
		Now:                 time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 2000 {
			return
		}
		tpl, err := New(src)
		if err != nil {
			var te *Error
			if !errors.As(err, &te) {
				t.Fatalf("New error is not a *Error: %v", err)
			}
			return
		}
		if _, err := tpl.Render(in); err != nil {
			var te *Error
			if !errors.As(err, &te) {
				t.Fatalf("Render error is not a *Error: %v", err)
			}
		}
	})
}

func TestRange(t *testing.T) {
	defer goleak.VerifyNone(t)
	tests := map[string]string{
		`{% for i in range(3) %}{{ i }}{% endfor %}`:                                       "012",
		`{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}`:                                 "135",
		`{% for i in range(5, 0, -2) %}{{ i }}{% endfor %}`:                                "531",
		`{% for i in range(3, 1) %}{{ i }}{% endfor %}`:                                    "",
		`{% for i in range(10) %}{% if i == 2 %}{% break %}{% endif %}{{ i }}{% endfor %}`: "01",
	}
	for src, want := range tests {
		if got := mustRender(t, src, Input{}); got != want {
			t.Errorf("%s: got %q, want %q", src, got, want)
		}
	}
	tpl, err := New(`{% for i in range(1000000000) %}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tpl.Render(Input{}); err == nil {
		t.Error("huge range: want error")
	}
}
