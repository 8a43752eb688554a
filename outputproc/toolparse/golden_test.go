package toolparse

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite testdata/*/*.golden.json from the parsers' output")

// result is a parser's final output, as stored in golden files.
type result struct {
	Content string       `json:"content"`
	Calls   []goldenCall `json:"calls"`
}

type goldenCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// markup lists, per parser, strings that must never reach content in a
// well-formed case.
var markup = map[string][]string{
	"hermes":      {"<tool_call>", "</tool_call>", `"arguments"`},
	"llama3_json": {"<|python_tag|>", `"parameters"`, `"name"`},
	"mistral":     {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"},
	"qwen3_coder": {"<tool_call>", "</tool_call>", "<function=", "<parameter=", "</parameter>", "</function>"},
	"pythonic":    {"<|python_start|>", "<|python_end|>", "get_time(", "get_weather(", "search(", "write_file("},
	"deepseek_v3": {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "```"},
}

func loadTools(t testing.TB) []Tool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "tools.json"))
	if err != nil {
		t.Fatalf("read tools: %v", err)
	}
	var tools []Tool
	if err := json.Unmarshal(raw, &tools); err != nil {
		t.Fatalf("decode tools: %v", err)
	}
	return tools
}

// feed runs text through a fresh parser in the given pieces, checking the
// per-delta contract, and returns the accumulated result.
func feed(t testing.TB, name string, tools []Tool, pieces []string) result {
	t.Helper()
	n := 0
	p, err := New(name, tools, func() string { n++; return fmt.Sprintf("call_%d", n) })
	if err != nil {
		t.Fatal(err)
	}
	var r result
	var sb strings.Builder
	collect := func(d Delta) {
		sb.WriteString(d.Content)
		for _, tc := range d.ToolCalls {
			switch {
			case tc.Index == len(r.Calls):
				if tc.Name == "" || tc.Type != "function" || tc.ID != fmt.Sprintf("call_%d", tc.Index+1) {
					t.Fatalf("first delta of call %d lacks id/type/name: %+v", tc.Index, tc)
				}
				r.Calls = append(r.Calls, goldenCall{Name: tc.Name})
			case tc.Index == len(r.Calls)-1:
				if tc.Name != "" || tc.ID != "" || tc.Type != "" {
					t.Fatalf("later delta of call %d repeats id/type/name: %+v", tc.Index, tc)
				}
			default:
				t.Fatalf("delta for call %d out of order (have %d calls)", tc.Index, len(r.Calls))
			}
			r.Calls[tc.Index].Arguments += tc.Arguments
		}
	}
	for _, s := range pieces {
		collect(p.Add(s))
	}
	collect(p.Finish())
	r.Content = sb.String()
	if p.Called() != (len(r.Calls) > 0) {
		t.Fatalf("Called() = %v with %d calls", p.Called(), len(r.Calls))
	}
	return r
}

// chunks cuts text into pieces of size runes.
func chunks(text string, size int) []string {
	var out []string
	runes := []rune(text)
	for i := 0; i < len(runes); i += size {
		out = append(out, string(runes[i:min(i+size, len(runes))]))
	}
	return out
}

// randomSplit cuts text at random rune boundaries.
func randomSplit(text string, rng *rand.Rand) []string {
	var out []string
	runes := []rune(text)
	for i := 0; i < len(runes); {
		n := 1 + rng.Intn(8)
		if rng.Intn(10) == 0 {
			n = 1 + rng.Intn(len(runes))
		}
		out = append(out, string(runes[i:min(i+n, len(runes))]))
		i += n
	}
	return out
}

// splits returns every way the golden test feeds text: every chunk size
// from 1 rune to the whole text, every cut into two pieces, and random
// splits.
func splits(text string) [][]string {
	var all [][]string
	n := utf8.RuneCountInString(text)
	for size := 1; size <= max(n, 1); size++ {
		all = append(all, chunks(text, size))
	}
	runes := []rune(text)
	for cut := 1; cut < n; cut++ {
		all = append(all, []string{string(runes[:cut]), string(runes[cut:])})
	}
	rng := rand.New(rand.NewSource(int64(n)))
	for i := 0; i < 200; i++ {
		all = append(all, randomSplit(text, rng))
	}
	return all
}

func TestGolden(t *testing.T) {
	tools := loadTools(t)
	for _, name := range Names() {
		files, err := filepath.Glob(filepath.Join("testdata", name, "*.txt"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no golden cases for %s: %v", name, err)
		}
		for _, file := range files {
			caseName := strings.TrimSuffix(filepath.Base(file), ".txt")
			t.Run(name+"/"+caseName, func(t *testing.T) {
				raw, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				text := string(raw)
				golden := strings.TrimSuffix(file, ".txt") + ".golden.json"

				content, calls, err := ParseAll(name, tools, text)
				if err != nil {
					t.Fatal(err)
				}
				got := result{Content: content}
				for _, c := range calls {
					got.Calls = append(got.Calls, goldenCall{Name: c.Name, Arguments: c.Arguments})
				}
				if *update {
					var out strings.Builder
					enc := json.NewEncoder(&out)
					enc.SetEscapeHTML(false)
					enc.SetIndent("", "  ")
					if err := enc.Encode(got); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				wantRaw, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("read golden (run with -update to create): %v", err)
				}
				var want result
				if err := json.Unmarshal(wantRaw, &want); err != nil {
					t.Fatalf("decode golden: %v", err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("ParseAll:\n got %+v\nwant %+v", got, want)
				}
				checkWellFormed(t, name, caseName, tools, want)
				for _, pieces := range splits(text) {
					if r := feed(t, name, tools, pieces); !reflect.DeepEqual(r, want) {
						t.Fatalf("streamed in %d pieces %q:\n got %+v\nwant %+v", len(pieces), pieces, r, want)
					}
				}
			})
		}
	}
}

// checkWellFormed asserts what every case but the malformed and truncated
// ones must satisfy: no markup in content, known names, valid JSON
// arguments.
func checkWellFormed(t *testing.T, parser, caseName string, tools []Tool, r result) {
	t.Helper()
	for _, c := range r.Calls {
		found := false
		for _, tl := range tools {
			found = found || tl.Name == c.Name
		}
		if !found {
			t.Errorf("call to unknown tool %q", c.Name)
		}
	}
	if strings.HasPrefix(caseName, "malformed") || strings.HasPrefix(caseName, "truncated") {
		return
	}
	// These two cases show markup-like text that is prose by design.
	proseByDesign := parser+"/"+caseName == "qwen3_coder/prose_only" || parser+"/"+caseName == "pythonic/prose_with_call_later"
	for _, m := range markup[parser] {
		if strings.Contains(r.Content, m) && !proseByDesign {
			t.Errorf("content %q contains markup %q", r.Content, m)
		}
	}
	for _, c := range r.Calls {
		if !json.Valid([]byte(c.Arguments)) {
			t.Errorf("call %s: arguments %q are not valid JSON", c.Name, c.Arguments)
		}
	}
}

func TestAppendCalls(t *testing.T) {
	calls := AppendCalls(nil, []ToolCallDelta{
		{Index: 1, ID: "b", Type: "function", Name: "g", Arguments: `{"x"`},
		{Index: 0, ID: "a", Type: "function", Name: "f"},
	})
	calls = AppendCalls(calls, []ToolCallDelta{{Index: 1, Arguments: `:1}`}, {Index: 0, Arguments: `{}`}})
	want := []ToolCall{
		{ID: "a", Type: "function", Name: "f", Arguments: `{}`},
		{ID: "b", Type: "function", Name: "g", Arguments: `{"x":1}`},
	}
	if len(calls) != len(want) {
		t.Fatalf("got %d calls, want %d: %+v", len(calls), len(want), calls)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Errorf("call %d = %+v, want %+v", i, calls[i], want[i])
		}
	}
}
