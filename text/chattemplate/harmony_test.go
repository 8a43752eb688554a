package chattemplate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// harmonyTemplate is gpt-oss's published chat template (see
// testdata/gpt-oss-20b.SOURCE.md).
func harmonyTemplate(t *testing.T) namedTemplate {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "gpt-oss-20b.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	return namedTemplate{name: "gpt-oss", source: string(src), bos: "<|startoftext|>", eos: "<|return|>"}
}

func loadHarmonyCases(t *testing.T) []renderCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "harmony_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []renderCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestHarmonyAgainstPython renders gpt-oss's template with Go and with
// Python's jinja2 (testdata/render_hf.py) for the harmony cases: system and
// developer instructions, tools in harmony's TypeScript-like namespace,
// reasoning effort, assistant reasoning and tool calls, tool results as
// functions.NAME messages, and the template's own errors. With -update it
// rewrites testdata/golden/gpt-oss from Python.
func TestHarmonyAgainstPython(t *testing.T) {
	nt := harmonyTemplate(t)
	cases := loadHarmonyCases(t)
	for i := range cases {
		cases[i] = cases[i].resolve(nt)
	}
	py, why := pythonReference(t, nt.source, cases)
	if py == nil {
		t.Skipf("SKIP: no Python reference (%s); TestHarmonyGoldenFiles still checks the committed golden files", why)
	}
	tpl, err := New(nt.source)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			want, ok := py[c.Name]
			if !ok {
				t.Fatal("no Python result")
			}
			got := renderGo(t, tpl, c)
			if !sameResult(got, want) {
				t.Errorf("Go %s\n---\nPython %s\n---\n%s", describe(got), describe(want), firstDiff(describe(got), describe(want)))
			}
			if want.Error != nil && got.Error != nil && *got.Error != *want.Error {
				t.Errorf("raise_exception message: Go %q, Python %q", *got.Error, *want.Error)
			}
			if strings.HasPrefix(c.Name, "error_") != (want.Error != nil) {
				t.Errorf("case %s: Python error = %v", c.Name, describe(want))
			}
			if *update {
				p := goldenPath(nt.name, c.Name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(goldenEncode(want)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestHarmonyGoldenFiles compares Go rendering with the committed Python
// outputs, so the check runs where python3-jinja2 is missing.
func TestHarmonyGoldenFiles(t *testing.T) {
	nt := harmonyTemplate(t)
	tpl, err := New(nt.source)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, c := range loadHarmonyCases(t) {
		c := c.resolve(nt)
		t.Run(c.Name, func(t *testing.T) {
			data, err := os.ReadFile(goldenPath(nt.name, c.Name))
			if err != nil {
				t.Fatalf("golden file missing (run go test -run TestHarmonyAgainstPython -update with python3-jinja2): %v", err)
			}
			got, want := goldenEncode(renderGo(t, tpl, c)), string(data)
			if strings.HasPrefix(want, "ERROR: ") {
				if got != want {
					t.Errorf("got %q, want %q", got, want)
				}
				return
			}
			if got != want {
				t.Errorf("got:\n%s\n---\nwant:\n%s", got, want)
			}
		})
	}
}

// firstDiff quotes the neighbourhood of the first byte where a and b differ.
func firstDiff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(i-40, 0)
	return "first difference at byte " + strconv.Itoa(i) + ": Go " + strconv.Quote(a[lo:min(i+40, len(a))]) + ", Python " + strconv.Quote(b[lo:min(i+40, len(b))])
}

// TestEmptyObjectAgainstPython checks that a JSON {} behaves as Jinja's
// empty dict in every place a template may use it (truthiness, tests,
// filters, methods), as Python renders it.
func TestEmptyObjectAgainstPython(t *testing.T) {
	src := `{%- for t in tools -%}{% set p = t.function.parameters %}` +
		`[{{ 'T' if p else 'F' }} {{ p is mapping }} {{ p|length }} {{ p|tojson }} {{ p.items()|list|length }} {{ p.get('x', 'd') }} {{ 'x' in p }}` +
		`{% for k, v in p.items() %}!{% endfor %}{% if not p %} empty{% endif %} {{ p == {} }}]{%- endfor -%}`
	c := renderCase{Name: "empty_object", Messages: []json.RawMessage{json.RawMessage(`{"role":"user","content":"hi"}`)},
		Tools: []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"f","parameters":{}}}`),
			json.RawMessage(`{"type":"function","function":{"name":"g","parameters":{"a":{}}}}`)}}
	c = c.resolve(namedTemplate{})
	tpl, err := New(src)
	if err != nil {
		t.Fatal(err)
	}
	got := renderGo(t, tpl, c)
	if got.Output == nil {
		t.Fatalf("Go: %s", describe(got))
	}
	py, why := pythonReference(t, src, []renderCase{c})
	if py == nil {
		t.Skipf("SKIP: no Python reference (%s)", why)
	}
	if want := py[c.Name]; !sameResult(got, want) {
		t.Errorf("Go %s\n---\nPython %s", describe(got), describe(want))
	}
	t.Logf("rendered: %s", *got.Output)
}
