package reasoning

import (
	"encoding/json"
	"flag"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*/*.golden.json from the parsers' output")

type result struct {
	Reasoning string `json:"reasoning"`
	Content   string `json:"content"`
}

// variants maps each testdata directory to a parser and options.
var variants = map[string]struct {
	name string
	opts Options
}{
	"deepseek_r1":  {"deepseek_r1", Options{}},
	"qwen3":        {"qwen3", Options{}},
	"qwen3_opened": {"qwen3", Options{ThinkingOpenedInPrompt: true}},
}

func feed(t testing.TB, name string, opts Options, pieces []string) result {
	t.Helper()
	p, err := New(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	var r, c strings.Builder
	for _, s := range pieces {
		a, b := p.Add(s)
		if b != "" && !p.Ended() {
			t.Fatalf("content %q before reasoning ended", b)
		}
		r.WriteString(a)
		c.WriteString(b)
	}
	a, b := p.Finish()
	r.WriteString(a)
	c.WriteString(b)
	return result{r.String(), c.String()}
}

func splits(text string) [][]string {
	runes := []rune(text)
	n := len(runes)
	var all [][]string
	for size := 1; size <= max(n, 1); size++ {
		var ps []string
		for i := 0; i < n; i += size {
			ps = append(ps, string(runes[i:min(i+size, n)]))
		}
		all = append(all, ps)
	}
	for cut := 1; cut < n; cut++ {
		all = append(all, []string{string(runes[:cut]), string(runes[cut:])})
	}
	rng := rand.New(rand.NewSource(int64(n)))
	for k := 0; k < 200; k++ {
		var ps []string
		for i := 0; i < n; {
			m := 1 + rng.Intn(6)
			ps = append(ps, string(runes[i:min(i+m, n)]))
			i += m
		}
		all = append(all, ps)
	}
	return all
}

func TestGolden(t *testing.T) {
	for dir, v := range variants {
		files, err := filepath.Glob(filepath.Join("testdata", dir, "*.txt"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no cases in %s", dir)
		}
		for _, file := range files {
			t.Run(dir+"/"+strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
				raw, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				text := string(raw)
				r, c, err := ParseAll(v.name, v.opts, text)
				if err != nil {
					t.Fatal(err)
				}
				got := result{r, c}
				golden := strings.TrimSuffix(file, ".txt") + ".golden.json"
				if *update {
					var sb strings.Builder
					enc := json.NewEncoder(&sb)
					enc.SetEscapeHTML(false)
					enc.SetIndent("", "  ")
					if err := enc.Encode(got); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, []byte(sb.String()), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				wantRaw, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("read golden (run with -update to create): %v", err)
				}
				var want result
				if err := json.Unmarshal(wantRaw, &want); err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("ParseAll = %+v, want %+v", got, want)
				}
				if !accounts(text, want.Reasoning, want.Content) {
					t.Fatalf("%+v does not account for the input", want)
				}
				for _, pieces := range splits(text) {
					if r := feed(t, v.name, v.opts, pieces); r != want {
						t.Fatalf("streamed %q: %+v, want %+v", pieces, r, want)
					}
				}
			})
		}
	}
}

func TestUnknownName(t *testing.T) {
	_, err := New("nope", Options{})
	if err == nil || !strings.Contains(err.Error(), "deepseek_r1") || !strings.Contains(err.Error(), "qwen3") {
		t.Fatalf("New(nope) error %v", err)
	}
}

// TestHoldback checks that only a possible partial tag is held back.
func TestHoldback(t *testing.T) {
	p, _ := New("deepseek_r1", Options{})
	steps := []struct{ in, reasoning, content string }{
		{"abc <", "abc ", ""},
		{"b> x </th", "<b> x ", ""},
		{"ink", "", ""},
		{">\n", "", ""},
		{"\nAns", "", "Ans"},
		{"wer <think>", "", "wer <think>"},
	}
	for i, s := range steps {
		r, c := p.Add(s.in)
		if r != s.reasoning || c != s.content {
			t.Errorf("step %d: Add(%q) = %q, %q; want %q, %q", i, s.in, r, c, s.reasoning, s.content)
		}
	}
	if !p.Ended() {
		t.Error("Ended() = false after </think>")
	}
}

// accounts reports whether text is: optional whitespace and <think>, the
// reasoning, optional </think> and whitespace, then the content.
func accounts(text, reasoning, content string) bool {
	if !strings.HasSuffix(text, content) {
		return false
	}
	rest := text[:len(text)-len(content)]
	cands := []string{rest}
	if t := strings.TrimRight(rest, " \t\r\n"); strings.HasSuffix(t, closeTag) {
		cands = append(cands, strings.TrimSuffix(t, closeTag))
	}
	for _, c := range cands {
		if !strings.HasSuffix(c, reasoning) {
			continue
		}
		if lead := strings.TrimLeft(c[:len(c)-len(reasoning)], " \t\r\n"); lead == "" || lead == openTag {
			return true
		}
	}
	return false
}

// FuzzParse feeds arbitrary text (which picks the parser and options,
// seed the random byte split) and checks: no panic, the streamed result
// equals ParseAll's, and reasoning + content account for the whole input
// except the tags and the whitespace around them.
func FuzzParse(f *testing.F) {
	for dir := range variants {
		files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.txt"))
		for i, file := range files {
			if raw, err := os.ReadFile(file); err == nil {
				f.Add(string(raw), uint8(i), int64(len(raw)))
			}
		}
	}
	f.Fuzz(func(t *testing.T, text string, which uint8, seed int64) {
		name := names[int(which)%len(names)]
		opts := Options{ThinkingOpenedInPrompt: which&4 != 0}
		r, c, err := ParseAll(name, opts, text)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewSource(seed))
		var pieces []string
		for i := 0; i < len(text); {
			m := 1 + rng.Intn(7)
			pieces = append(pieces, text[i:min(i+m, len(text))])
			i += m
		}
		if got := feed(t, name, opts, pieces); got != (result{r, c}) {
			t.Fatalf("streamed %+v, ParseAll %+v", got, result{r, c})
		}
		if !accounts(text, r, c) {
			t.Fatalf("%s %+v: reasoning %q content %q do not account for %q", name, opts, r, c, text)
		}
		if name == "qwen3" && !opts.ThinkingOpenedInPrompt && !strings.HasPrefix(strings.TrimLeft(text, " \t\r\n"), openTag) && (r != "" || c != text) {
			t.Fatalf("qwen3 without <think>: reasoning %q content %q", r, c)
		}
	})
}
