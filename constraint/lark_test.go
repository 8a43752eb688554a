package constraint

import "testing"

func TestLarkLanguages(t *testing.T) {
	cases := []struct {
		grammar string
		in, out []string
	}{
		{`start: NAME "=" NUMBER
NAME: /[a-z_]+/
%import common.NUMBER`, []string{"x=1", "ab_c=3.5e2"}, []string{"x = 1", "X=1", "x="}},
		{`start: list
list: "[" [item ("," item)*] "]"
?item: SIGNED_INT | list
%import common (SIGNED_INT, WS)
%ignore WS`, []string{"[]", "[1,-2]", "[ 1 , [ 2 ] ]", " [3] "}, []string{"[1,]", "[", "[1 2]"}},
		{`start: "a".."c"~2..3 "x"i  // trailing comment
`, []string{"abX", "cccx"}, []string{"ax", "abcdx"}},
		{`start: greeting
greeting: "hi"
        | "hello" _NAME?
_NAME: " " LETTER+
%import common.LETTER`, []string{"hi", "hello", "hello Bob"}, []string{"hi Bob", "hello "}},
	}
	for _, c := range cases {
		if !IsLark(c.grammar) {
			t.Fatalf("not detected as Lark: %q", c.grammar)
		}
		ct, err := GBNF(c.grammar)
		if err != nil {
			t.Fatalf("%q: %v", c.grammar, err)
		}
		g, err := Compile(ct)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range c.in {
			if !irMatches(g, g.Start, s) {
				t.Errorf("%q: %q rejected\n%s", c.grammar, s, g)
			}
		}
		for _, s := range c.out {
			if irMatches(g, g.Start, s) {
				t.Errorf("%q: %q accepted", c.grammar, s)
			}
		}
	}
}

func TestLarkErrors(t *testing.T) {
	for _, g := range []string{
		`rule: "a"`, `start: undefined_rule`, `start: UNDEFINED`, `start: "a"
%import other.X`, `start: /a(?=b)/`, `start: "a" ~ 5..2`, `start: A
A: A "x"`, `start: /abc`, `start: "a"
start: "b"`,
	} {
		if _, err := GBNF(g); err == nil {
			t.Errorf("%q: accepted", g)
		}
	}
}

// FuzzLark: arbitrary Lark text never panics the reader.
func FuzzLark(f *testing.F) {
	f.Add("start: a+ B\na: \"x\" | /y+/i\nB: \"b\"..\"d\" ~ 2\n%ignore \" \"")
	f.Add("start: [\"a\"] (start)?\n%import common (WS, INT)")
	f.Fuzz(func(t *testing.T, text string) {
		g, err := ParseLark(text)
		if err != nil {
			return
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("parsed grammar invalid: %v", err)
		}
		_ = g.Check()
	})
}
