package toolparse

import (
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fuzzTools is the tool list the fuzz targets offer (testdata/tools.json
// without reading files inside the fuzz loop).
var fuzzTools = []Tool{
	{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}`)},
	{Name: "search", Parameters: []byte(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"},"exact":{"type":"boolean"},"filters":{"type":"object"}}}`)},
	{Name: "write_file", Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}`)},
	{Name: "get_time"},
}

// byteSplit cuts text at random byte offsets (possibly inside a UTF-8
// sequence, which parsers must also survive).
func byteSplit(text string, seed int64) []string {
	rng := rand.New(rand.NewSource(seed))
	var out []string
	for i := 0; i < len(text); {
		n := 1 + rng.Intn(6)
		if rng.Intn(8) == 0 {
			n = 1 + rng.Intn(len(text))
		}
		out = append(out, text[i:min(i+n, len(text))])
		i += n
	}
	return out
}

// isSubsequence reports whether s can be obtained from t by deleting bytes.
func isSubsequence(s, t string) bool {
	j := 0
	for i := 0; i < len(t) && j < len(s); i++ {
		if t[i] == s[j] {
			j++
		}
	}
	return j == len(s)
}

func addGoldenSeeds(f *testing.F, add func(text string, which uint8)) {
	for i, name := range Names() {
		files, _ := filepath.Glob(filepath.Join("testdata", name, "*.txt"))
		for _, file := range files {
			raw, err := os.ReadFile(file)
			if err == nil {
				add(string(raw), uint8(i))
			}
		}
	}
}

// FuzzParse feeds arbitrary text through every parser. text is the model
// output, which picks the parser (mod the number of parsers; with its top
// bit set, pieces of that parser's markup are spliced into text at random
// places), seed the random split into deltas and the splicing. Invariants: no panic; the streamed result is
// the same as ParseAll's; content never invents characters (it is a
// subsequence of the input); without calls, content is the input exactly;
// for the verbatim JSON formats, every call's arguments are a substring of
// the input.
func FuzzParse(f *testing.F) {
	addGoldenSeeds(f, func(text string, which uint8) { f.Add(text, which, int64(len(text))) })
	f.Add("plain <b>text</b> [1] {x}", uint8(0), int64(1))
	f.Fuzz(func(t *testing.T, text string, which uint8, seed int64) {
		names := Names()
		name := names[int(which)%len(names)]
		if which&0x80 != 0 {
			text = spliceMarkup(text, name, seed)
		}
		content, calls, err := ParseAll(name, fuzzTools, text)
		if err != nil {
			t.Fatal(err)
		}
		want := result{Content: content}
		for _, c := range calls {
			want.Calls = append(want.Calls, goldenCall{Name: c.Name, Arguments: c.Arguments})
		}
		if got := feed(t, name, fuzzTools, byteSplit(text, seed)); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: streamed %+v, ParseAll %+v", name, got, want)
		}
		if !isSubsequence(content, text) {
			t.Fatalf("%s: content %q is not drawn from the input %q", name, content, text)
		}
		if len(calls) == 0 && content != text {
			t.Fatalf("%s: no calls, content %q != input %q", name, content, text)
		}
		switch name {
		case "hermes", "llama3_json", "mistral", "deepseek_v3":
			for _, c := range calls {
				if c.Arguments != "{}" && !strings.Contains(text, c.Arguments) {
					t.Fatalf("%s: arguments %q are not verbatim from the input", name, c.Arguments)
				}
			}
		}
	})
}

// markupPieces are fragments of each format, for splicing into random text.
var markupPieces = map[string][]string{
	"hermes":      {"<tool_call>", "</tool_call>", `{"name": "get_time", "arguments": `, `{"name": "search", "arguments": {"query": "`, `"}}`, "}", "\n"},
	"llama3_json": {"<|python_tag|>", `{"name": "get_time", "parameters": `, `{"name": "search", "parameters": {"query": "`, `"}}`, "}", ";"},
	"mistral":     {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "get_time", "search", `{"query": "`, `"}`, `[{"name": "get_time", "arguments": {}}`, "]"},
	"qwen3_coder": {"<tool_call>", "</tool_call>", "<function=search>", "<function=get_time>", "<parameter=query>", "<parameter=limit>", "</parameter>", "</function>", "\n"},
	"pythonic":    {"[", "]", "get_time(", "search(", "query=", "limit=", `"`, "'", ")", ", ", "<|python_start|>"},
	"deepseek_v3": {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "function<｜tool▁sep｜>", "search\n```json\n", `{"query": "`, `"}`, "\n```", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"},
}

// spliceMarkup inserts up to 6 markup fragments of parser into text.
func spliceMarkup(text, parser string, seed int64) string {
	rng := rand.New(rand.NewSource(seed))
	pieces := markupPieces[parser]
	for n := rng.Intn(7); n > 0; n-- {
		at := 0
		if len(text) > 0 {
			at = rng.Intn(len(text) + 1)
		}
		text = text[:at] + pieces[rng.Intn(len(pieces))] + text[at:]
	}
	return text
}

// pyRepr writes s as a double-quoted Python string literal.
func pyRepr(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c < 0x20:
			b.WriteString(`\x`)
			b.WriteByte("0123456789abcdef"[c>>4])
			b.WriteByte("0123456789abcdef"[c&15])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// injected builds prose + one well-formed write_file call + prose in
// parser's markup, and returns the text, the expected content and the
// expected arguments.
func injected(parser, prefix, value, suffix string) (text, content, args string) {
	clean := func(s, drop string) string {
		return strings.Map(func(r rune) rune {
			if strings.ContainsRune(drop, r) {
				return -1
			}
			return r
		}, s)
	}
	drop := "<"
	switch parser {
	case "mistral":
		drop = "["
	case "llama3_json":
		drop = "<;"
	}
	prefix, suffix = clean(prefix, drop), clean(suffix, drop)
	if parser == "pythonic" {
		prefix = "" // a pythonic list is recognised only at the start
	}
	jv := mustJSON(value)
	args = `{"path": "p", "content": ` + jv + `}`
	var call string
	switch parser {
	case "hermes":
		call = `<tool_call>{"name": "write_file", "arguments": ` + args + `}</tool_call>`
	case "llama3_json":
		call = `<|python_tag|>{"name": "write_file", "parameters": ` + args + `}`
	case "mistral":
		call = `[TOOL_CALLS]write_file[ARGS]` + args
	case "deepseek_v3":
		call = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>write_file\n```json\n" + args + "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
	case "qwen3_coder":
		value = clean(value, "<")
		args = `{"path": "p", "content": ` + quoteJSON(value) + `}`
		call = "<tool_call>\n<function=write_file>\n<parameter=path>\np\n</parameter>\n<parameter=content>\n" + value + "\n</parameter>\n</function>\n</tool_call>"
	case "pythonic":
		args = `{"path": "p", "content": ` + quoteJSON(value) + `}`
		call = `[write_file(path="p", content=` + pyRepr(value) + `)]`
	}
	if strings.Trim(prefix, " \t\r\n") != "" {
		content = prefix
	}
	if strings.Trim(suffix, " \t\r\n") != "" {
		content += suffix
	}
	return prefix + call + suffix, content, args
}

// FuzzInjected puts one well-formed call (its string argument is value)
// between random prose (prefix, suffix, with the characters that start the
// parser's markup removed) and checks, for every parser and a random split
// (seed), that exactly that call is found and the prose is the content.
func FuzzInjected(f *testing.F) {
	f.Add("Let me check.", "line1\n\"quoted\" </tool_call> \\ 東京 🌤️", " Done.", int64(1))
	f.Add("", "", "", int64(2))
	f.Add("  ", "}{][", "\n\n", int64(3))
	f.Fuzz(func(t *testing.T, prefix, value, suffix string, seed int64) {
		for _, name := range Names() {
			text, content, args := injected(name, prefix, value, suffix)
			got := feed(t, name, fuzzTools, byteSplit(text, seed))
			if len(got.Calls) != 1 || got.Calls[0].Name != "write_file" || got.Calls[0].Arguments != args {
				t.Fatalf("%s: %q gave calls %+v, want args %s", name, text, got.Calls, args)
			}
			if got.Content != content {
				t.Fatalf("%s: %q gave content %q, want %q", name, text, got.Content, content)
			}
		}
	})
}
