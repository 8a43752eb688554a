package constraint

import (
	"encoding/json"
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestUnsupportedKeywordsNamed(t *testing.T) {
	cases := []struct{ schema, keyword, pointer string }{
		{`{"type":"array","uniqueItems":true}`, "uniqueItems", "#"},
		{`{"type":"object","properties":{"a":{"type":"array","contains":{"type":"integer"}}}}`, "contains", "#/properties/a"},
		{`{"not":{"type":"string"}}`, "not", "#"},
		{`{"if":{"type":"string"},"then":{"minLength":1}}`, "if", "#"},
		{`{"type":"object","patternProperties":{"^x":{}}}`, "patternProperties", "#"},
		{`{"type":"object","propertyNames":{"maxLength":3}}`, "propertyNames", "#"},
		{`{"type":"object","minProperties":1}`, "minProperties", "#"},
		{`{"type":"integer","multipleOf":3}`, "multipleOf", "#"},
		{`{"type":"object","dependentRequired":{"a":["b"]}}`, "dependentRequired", "#"},
		{`{"$ref":"https://example.com/s.json"}`, "$ref", "#"},
		{`{"type":"string","format":"ipv6"}`, "format", "#"},
		{`{"type":"string","pattern":"^(?=a)"}`, "pattern", "#"},
		{`{"type":"string","pattern":"a+","maxLength":3}`, "pattern", "#"},
		{`{"type":"number","exclusiveMinimum":0.5}`, "exclusiveMinimum", "#"},
		{`{"type":"number","maximum":2.25}`, "maximum", "#"},
		{`{"$defs":{"x":{"type":"string","x-custom":1}},"properties":{"p/q":{"$ref":"#/$defs/x"}}}`, "x-custom", "#/$defs/x"},
		{`{"type":"object","properties":{"p/q":{"type":"string","contentEncoding":"base64","maxLength":2}}}`, "contentEncoding", "#/properties/p~1q"},
		{`{"type":"string","maxLength":5000}`, "maxLength", "#"},
		{`{"allOf":[{"type":"string"},{"maxLength":3}]}`, "allOf", "#"},
		{`{"type":"object","required":["missing"]}`, "required", "#"},
	}
	for _, tc := range cases {
		_, err := JSONSchema(json.RawMessage(tc.schema), true)
		var ue *UnsupportedError
		if !errors.As(err, &ue) {
			t.Errorf("%s: want UnsupportedError, got %v", tc.schema, err)
			continue
		}
		if ue.Keyword != tc.keyword || ue.Pointer != tc.pointer {
			t.Errorf("%s: got keyword %q at %q, want %q at %q", tc.schema, ue.Keyword, ue.Pointer, tc.keyword, tc.pointer)
		}
		want := `unsupported JSON Schema keyword "` + tc.keyword + `" at ` + tc.pointer
		if !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: message %q does not start with %q", tc.schema, err, want)
		}
	}
}

func TestNotInSet(t *testing.T) {
	names := []string{"a", "ab", "name", "日本", ""}
	re := regexp.MustCompile(`^` + notInSet(names) + `$`)
	for _, s := range []string{"b", "abc", "nam", "names", "日", "日本語", "x y", "aa"} {
		if !re.MatchString(s) {
			t.Errorf("%q rejected", s)
		}
	}
	for _, s := range append(names, `q"`, `\`) {
		if re.MatchString(s) {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestInvalidSchemas(t *testing.T) {
	for _, s := range []string{
		`{"type":"string"`, `[1]`, `{"type":"strin"}`, `{"enum":[]}`, `{"$ref":"#/$defs/none"}`,
		`{"type":"integer","minimum":10,"maximum":5}`, `{"a":1,"a":2}`, `false`,
		`{"$ref":"#/$defs/a","$defs":{"a":{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"required":["x"]}}}`,
	} {
		if _, err := JSONSchema(json.RawMessage(s), true); err == nil {
			t.Errorf("%s: accepted", s)
		}
	}
}

func TestCanonicalHash(t *testing.T) {
	a, err := JSONSchema(json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer","minimum":1.0},"y":{"type":"string"}},"required":["x"]}`), true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := JSONSchema(json.RawMessage(`{ "required" : ["x"], "properties": {"x": {"minimum": 1, "type": "integer"}, "y": {"type":"string"}}, "type": "object" }`), false)
	if err != nil {
		t.Fatal(err)
	}
	if a.Spec != b.Spec || a.Hash != b.Hash {
		t.Fatalf("equal schemas differ:\n%s\n%s", a.Spec, b.Spec)
	}
	c, _ := JSONSchema(json.RawMessage(`{"type":"object","properties":{"y":{"type":"string"},"x":{"type":"integer","minimum":1}},"required":["x"]}`), true)
	if c.Hash == a.Hash {
		t.Fatal("property order must change the constraint (it is the generation order)")
	}
	if JSONObject().Hash == "" || JSONObject().Hash != JSONObject().Hash {
		t.Fatal("json_object hash")
	}
	r1, _ := Regex("a+")
	c1, _ := Choice([]string{"a+"})
	if r1.Hash == c1.Hash {
		t.Fatal("kind must be part of the hash")
	}
}

// TestGoldenIR pins the lowering of each testdata/*.schema.json (and
// *.gbnf) to its .golden grammar dump. Run with -update to rewrite.
func TestGoldenIR(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.in")
	if len(files) == 0 {
		t.Fatal("no golden inputs")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			kind, spec, _ := strings.Cut(string(raw), "\n")
			var g *Grammar
			switch kind {
			case "json_schema":
				ct, err := JSONSchema(json.RawMessage(spec), true)
				if err != nil {
					t.Fatal(err)
				}
				g, err = Compile(ct)
				if err != nil {
					t.Fatal(err)
				}
			case "gbnf":
				g, err = ParseGBNF(spec)
				if err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("unknown kind %q", kind)
			}
			got := g.String()
			golden := strings.TrimSuffix(f, ".in") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if got != string(want) {
				t.Errorf("IR differs from %s:\n%s", golden, got)
			}
		})
	}
}

// TestIntRange checks the integer range regexes exhaustively on windows
// around random bounds.
func TestIntRange(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < 300; i++ {
		scale := []int64{10, 1000, 100000, 1e12}[r.IntN(4)]
		lo := r.Int64N(2*scale) - scale
		hi := lo + r.Int64N(scale)
		re := regexp.MustCompile(`^` + intRange(lo, hi) + `$`)
		for _, x := range []int64{lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, 0, -1, (lo + hi) / 2, lo - 10, hi + 10} {
			want := x >= lo && x <= hi
			if got := re.MatchString(strconv.FormatInt(x, 10)); got != want {
				t.Fatalf("[%d,%d] %d: got %v", lo, hi, x, got)
			}
		}
		for k := 0; k < 50; k++ {
			x := lo - 50 + r.Int64N(hi-lo+100)
			if got := re.MatchString(strconv.FormatInt(x, 10)); got != (x >= lo && x <= hi) {
				t.Fatalf("[%d,%d] %d: got %v", lo, hi, x, got)
			}
		}
		if re.MatchString("0"+strconv.FormatInt(max(lo, 1), 10)) || re.MatchString("-0") {
			t.Fatalf("[%d,%d]: leading zero accepted", lo, hi)
		}
	}
}

// TestNumRange checks number range regexes against direct comparison
// on random decimals around random bounds.
func TestNumRange(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for i := 0; i < 300; i++ {
		lo := r.Int64N(40) - 20
		hi := lo + r.Int64N(20)
		loEx, hiEx := r.IntN(2) == 0, r.IntN(2) == 0
		if r.IntN(5) == 0 {
			lo, loEx = -maxBound, false
		}
		if r.IntN(5) == 0 {
			hi, hiEx = maxBound, false
		}
		if lo == hi && (loEx || hiEx) {
			continue
		}
		re := regexp.MustCompile(`^` + numRange(lo, loEx, hi, hiEx) + `$`)
		for k := 0; k < 80; k++ {
			var s string
			switch r.IntN(3) {
			case 0:
				s = strconv.FormatInt(r.Int64N(60)-30, 10)
			case 1:
				s = strconv.FormatFloat(float64(r.Int64N(6000)-3000)/100, 'f', -1, 64)
			default:
				s = strconv.FormatInt(r.Int64N(60)-30, 10) + ".0"
			}
			x, _ := strconv.ParseFloat(s, 64)
			want := (x > float64(lo) || !loEx && x == float64(lo)) && (x < float64(hi) || !hiEx && x == float64(hi))
			if strings.HasPrefix(s, "-0") && x == 0 {
				continue // "-0" is a matter of taste
			}
			if got := re.MatchString(s); got != want {
				t.Fatalf("lo %d ex %v hi %d ex %v: %s got %v want %v", lo, loEx, hi, hiEx, s, got, want)
			}
		}
	}
}

func TestJSONStringPattern(t *testing.T) {
	cases := []struct {
		pattern string
		in, out []string // JSON-encoded string contents
	}{
		{`^[a-z]+$`, []string{"abc"}, []string{"", "aB", "a1"}},
		{`b`, []string{"b", "abc", `x\"b`}, []string{"a", ""}},
		{`^"[\\]?.$`, []string{`\"x`, `\"\\y`, `\"\n`[:2] + "z"}, []string{`"x`, `\"`}},
		{`^\d{2}$`, []string{"12"}, []string{"1", "123"}},
	}
	for _, c := range cases {
		p, err := jsonStringPattern(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`^(?:` + p + `)$`)
		for _, s := range c.in {
			if !re.MatchString(s) {
				t.Errorf("%s (%s): %q rejected", c.pattern, p, s)
			}
		}
		for _, s := range c.out {
			if re.MatchString(s) {
				t.Errorf("%s (%s): %q accepted", c.pattern, p, s)
			}
		}
	}
}

func TestGBNFErrors(t *testing.T) {
	for _, g := range []string{
		``, `root ::= foo`, `root ::= "abc`, `root ::= [a-`, `root ::= (a`, `root ::= "a"{2,1}`,
		"root ::= \"a\"\nroot ::= \"b\"", `root ::= "\q"`, `root ::= root "a"`, `rot ::= "a"`,
	} {
		ct, err := GBNF(g)
		if err == nil {
			t.Errorf("%q: accepted as %+v", g, ct)
		}
	}
}

func TestGBNFLanguages(t *testing.T) {
	cases := []struct {
		grammar string
		in, out []string
	}{
		{"root ::= (\"a\" | \"b\")+ [0-9]?", []string{"a", "abba7"}, []string{"", "7", "ab77"}},
		{"root ::= \"x\"{2,3} # comment\n", []string{"xx", "xxx"}, []string{"x", "xxxx"}},
		{"root ::= [^\\n]* \"\\n\"", []string{"hi\n", "\n"}, []string{"hi", "a\nb\n"}},
		{"root ::= item (\n  \",\" item\n)*\nitem ::= [a-z]", []string{"a", "a,b,c"}, []string{"a,", ",a"}},
		{"root ::= . \"\\u00e9\" \"\\x41\"", []string{"zéA", "\néA"}, []string{"éA", "zeA"}},
	}
	for _, c := range cases {
		g, err := ParseGBNF(c.grammar)
		if err != nil {
			t.Fatalf("%q: %v", c.grammar, err)
		}
		if err := g.Check(); err != nil {
			t.Fatalf("%q: %v", c.grammar, err)
		}
		for _, s := range c.in {
			if !irMatches(g, g.Start, s) {
				t.Errorf("%q: %q rejected", c.grammar, s)
			}
		}
		for _, s := range c.out {
			if irMatches(g, g.Start, s) {
				t.Errorf("%q: %q accepted", c.grammar, s)
			}
		}
	}
}

// irMatches is a slow reference recogniser for the IR (backtracking over
// alternatives and terminal split points), for small tests only.
func irMatches(g *Grammar, rule int, s string) bool {
	res := map[string]*regexp.Regexp{}
	var seq func(syms []Symbol, s string) bool
	var rl func(r int, s string) bool
	depth := 0
	rl = func(r int, s string) bool {
		depth++
		defer func() { depth-- }()
		if depth > 200 {
			return false
		}
		for _, alt := range g.Rules[r].Alts {
			if seq(alt, s) {
				return true
			}
		}
		return false
	}
	seq = func(syms []Symbol, s string) bool {
		if len(syms) == 0 {
			return s == ""
		}
		for i := 0; i <= len(s); i++ {
			head, tail := s[:i], s[i:]
			sym := syms[0]
			ok := false
			if sym.IsTerminal() {
				p := g.Terminals[sym.Index()]
				re := res[p]
				if re == nil {
					re = regexp.MustCompile(`^(?:` + p + `)$`)
					res[p] = re
				}
				ok = re.MatchString(head)
			} else {
				ok = rl(sym.Index(), head)
			}
			if ok && seq(syms[1:], tail) {
				return true
			}
		}
		return false
	}
	return rl(rule, s)
}

// FuzzJSONSchema: arbitrary bytes never panic the schema compiler; what
// compiles passes the grammar checks.
func FuzzJSONSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string","maxLength":3}},"required":["a"]}`,
		`{"anyOf":[{"type":"integer","minimum":-3},{"$ref":"#"}]}`,
		`{"type":"array","prefixItems":[{"const":1}],"items":false,"minItems":1}`,
		`{"type":"string","pattern":"^a(b|c)*$"}`, `{"enum":[1,"x",null,{"a":[]}]}`, `true`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ct, err := JSONSchema(data, true)
		if err != nil {
			return
		}
		g, err := Compile(ct)
		if err != nil {
			t.Fatalf("constructor accepted but Compile failed: %v", err)
		}
		if err := g.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzGBNF: arbitrary grammar text never panics the reader; what parses
// is a valid IR.
func FuzzGBNF(f *testing.F) {
	for _, s := range []string{
		"root ::= \"a\" b*\nb ::= [x-z] | \"(\" root \")\"",
		"root ::= [^\"\\\\] {1,3} ( \"|\" root )?",
		"root ::= .+ # c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		g, err := ParseGBNF(text)
		if err != nil {
			return
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("parsed grammar invalid: %v", err)
		}
		_ = g.Check()
	})
}
