package harmony

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/outputproc/toolparse"
)

var update = flag.Bool("update", false, "rewrite testdata/cases/*.golden.json from the parser's output")

// testTools are the tools every case's request offers.
var testTools = []toolparse.Tool{{Name: "get_weather"}, {Name: "get_time"}, {Name: "search"}}

// result is a parser's whole output, as golden files store it.
type result struct {
	Reasoning string       `json:"reasoning"`
	Content   string       `json:"content"`
	Calls     []goldenCall `json:"calls"`
}

type goldenCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// feed runs pieces through a fresh parser, checking the per-delta contract
// (a call's first delta, and only it, has id, type and name; indices are in
// order), and returns the accumulated result.
func feed(t testing.TB, pieces []string) result {
	t.Helper()
	n := 0
	p := New(testTools, func() string { n++; return fmt.Sprintf("call_%d", n) })
	var r result
	var rs, cs strings.Builder
	collect := func(d Delta) {
		rs.WriteString(d.Reasoning)
		cs.WriteString(d.Content)
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
	r.Reasoning, r.Content = rs.String(), cs.String()
	if p.Called() != (len(r.Calls) > 0) {
		t.Fatalf("Called() = %v with %d calls", p.Called(), len(r.Calls))
	}
	return r
}

// chunks cuts s into pieces of n bytes.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// noMarkup fails if a markup token reached the output.
func noMarkup(t testing.TB, r result) {
	t.Helper()
	for _, tag := range tags {
		for _, s := range []string{r.Reasoning, r.Content} {
			if strings.Contains(s, tag) {
				t.Fatalf("markup %q leaked into %q", tag, s)
			}
		}
		for _, c := range r.Calls {
			if strings.Contains(c.Arguments, tag) || strings.Contains(c.Name, tag) {
				t.Fatalf("markup %q leaked into call %+v", tag, c)
			}
		}
	}
}

// TestGolden feeds each testdata/cases/*.txt output at every chunk size,
// from 1 byte to the whole text, and requires the golden result each time.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "cases", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".txt")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			text := string(data)
			whole := feed(t, []string{text})
			goldenFile := strings.TrimSuffix(f, ".txt") + ".golden.json"
			if *update {
				var out bytes.Buffer
				enc := json.NewEncoder(&out)
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				if err := enc.Encode(whole); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(goldenFile, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			raw, err := os.ReadFile(goldenFile)
			if err != nil {
				t.Fatalf("golden missing (go test ./outputproc/harmony -run TestGolden -args -update): %v", err)
			}
			var want result
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(whole, want) {
				t.Fatalf("whole text:\n got %+v\nwant %+v", whole, want)
			}
			for n := 1; n <= len(text); n++ {
				if got := feed(t, chunks(text, n)); !reflect.DeepEqual(got, want) {
					t.Fatalf("chunk size %d:\n got %+v\nwant %+v", n, got, want)
				}
			}
			noMarkup(t, want)
			r, c, calls := ParseAll(testTools, nil, text)
			if r != want.Reasoning || c != want.Content || len(calls) != len(want.Calls) {
				t.Fatalf("ParseAll: %q %q %+v", r, c, calls)
			}
			for i, call := range calls {
				if call.Name != want.Calls[i].Name || call.Arguments != want.Calls[i].Arguments || call.Type != "function" || !strings.HasPrefix(call.ID, "chatcmpl-tool-") {
					t.Fatalf("ParseAll call %d: %+v", i, call)
				}
			}
		})
	}
}

// TestNoTools accepts any function name when the request lists no tools.
func TestNoTools(t *testing.T) {
	_, _, calls := ParseAll(nil, nil, "<|channel|>commentary to=functions.anything <|constrain|>json<|message|>{}<|call|>")
	if len(calls) != 1 || calls[0].Name != "anything" {
		t.Errorf("calls %+v", calls)
	}
}

// fuzzVocab are the pieces fuzz inputs are built from: markup, header
// words, and body text. Pieces with '<' or '|' can form markup-like text.
var fuzzVocab = []string{
	tagStart, tagChannel, tagMessage, tagConstrain, tagEnd, tagCall, tagReturn, tagEOT,
	"assistant", "analysis", "final", "commentary", " to=functions.get_weather", " to=functions.get_time",
	" to=python", "to=functions.nope", " json", " ", "\n", "Hello", " world", "{\"a\": 1}", "{", "Zürich 東京",
	strings.Repeat("long ", 30), "<", "|", ">", "<|", "|>", "<|en", "d|>",
}

// FuzzHarmony builds an output from fuzzVocab (each input byte picks a
// piece), feeds it whole and in random pieces (seeded by split), and checks
// that both agree, that the per-delta contract holds, and that when no
// body piece contains '<' or '|' no markup token reaches the output. A raw
// string input is also fed as is.
func FuzzHarmony(f *testing.F) {
	f.Add([]byte{1, 2, 11, 3, 16, 18, 5, 0, 12, 3, 19}, uint64(1), "<|channel|>final<|message|>x")
	f.Add([]byte{1, 13, 3, 2, 22, 6}, uint64(7), "<|channel|>commentary to=functions.f<|message|>{<|call|>")
	f.Fuzz(func(t *testing.T, picks []byte, split uint64, raw string) {
		if len(picks) > 200 {
			picks = picks[:200]
		}
		var sb strings.Builder
		clean := true
		for _, b := range picks {
			piece := fuzzVocab[int(b)%len(fuzzVocab)]
			if int(b)%len(fuzzVocab) >= 8 && strings.ContainsAny(piece, "<|") {
				clean = false
			}
			sb.WriteString(piece)
		}
		for _, text := range []string{sb.String(), raw} {
			whole := feed(t, []string{text})
			r := rand.New(rand.NewPCG(split, 3))
			var pieces []string
			for rest := text; len(rest) > 0; {
				n := 1 + r.IntN(min(len(rest), 12))
				pieces = append(pieces, rest[:n])
				rest = rest[n:]
			}
			if got := feed(t, pieces); !reflect.DeepEqual(got, whole) {
				t.Fatalf("%q split %q:\n got %+v\nwant %+v", text, pieces, got, whole)
			}
			if clean && text == sb.String() {
				noMarkup(t, whole)
			}
		}
	})
}

// BenchmarkParse measures the parser on a reasoning + tool call output fed
// token-sized (4-byte) deltas.
//
//	go test -run XXX -bench Parse ./outputproc/harmony/
func BenchmarkParse(b *testing.B) {
	text := "<|channel|>analysis<|message|>" + strings.Repeat("Let me think about this. ", 40) + "<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\": \"Paris, France\", \"unit\": \"celsius\"}<|call|>"
	pieces := chunks(text, 4)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		p := New(testTools, func() string { return "id" })
		for _, s := range pieces {
			p.Add(s)
		}
		p.Finish()
	}
}
