package guide

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/constraint"
	"github.com/sluice-llm/sluice/ipc"
)

// tokenize spells s greedily with the longest vocabulary tokens that the
// matcher allows (a stand-in for a real tokenizer in tests).
func tokenize(t *testing.T, m *Matcher, s string) []int32 {
	t.Helper()
	v := m.g.vocab
	var out []int32
	for len(s) > 0 {
		best := int32(-1)
		for id := int32(0); id < int32(v.Size()); id++ {
			b := v.toks[id]
			if len(b) > 0 && !v.special[id] && strings.HasPrefix(s, string(b)) && (best < 0 || len(b) > len(v.toks[best])) && m.Allows(id) {
				best = id
			}
		}
		if best < 0 {
			t.Fatalf("cannot spell %q", s)
		}
		if err := m.Accept(best); err != nil {
			t.Fatal(err)
		}
		out = append(out, best)
		s = s[len(v.toks[best]):]
	}
	return out
}

func TestKindsAcceptAndReject(t *testing.T) {
	v := testVocab(t)
	c := NewCompiler(v, 8)
	eos := v.EOS()[0]
	mk := func(ct ipc.Constraint, err error) ipc.Constraint {
		if err != nil {
			t.Fatal(err)
		}
		return ct
	}
	cases := []struct {
		name string
		ct   ipc.Constraint
		good []string
		bad  []string
	}{
		{"choice", mk(constraint.Choice([]string{"yes", "no", "maybe so"})), []string{"yes", "maybe so"}, []string{"ye", "yess", "maybe"}},
		{"regex", mk(constraint.Regex(`^\d{3}-[a-z]+$`)), []string{"123-abc"}, []string{"12-abc", "123-", "123-abc1"}},
		{"json_object", constraint.JSONObject(), []string{`{}`, `{"a": [1, {"b": null}], "c": "x\"y"}`, "{\n  \"k\": true\n}"}, []string{`[]`, `{"a":}`, `{"a":1} `, `{"a":1}x`, ` {"k":true}`, `{"k":  true}`}},
		{"json_object any whitespace", constraint.JSONObjectWhitespace(constraint.WhitespaceAny), []string{` {"k":true}`, "{\"k\"\n\t:  true}"}, []string{`{"a":1} `, "{" + strings.Repeat(" ", 21) + "}"}},
		{"gbnf", mk(constraint.GBNF("root ::= item (\",\" item)*\nitem ::= [a-c]+ | \"(\" root \")\"")), []string{"a", "ab,(c,a),b", "((a))"}, []string{"", "a,", "(a", "d"}},
		{"lark", mk(constraint.GBNF("start: \"[\" [NUM (\",\" NUM)*] \"]\"\nNUM: /[0-9]+/\n%ignore \" \"")), []string{"[]", "[1, 23 ,4]", " [ 5 ] "}, []string{"[1,]", "[a]", "[1 2]"}},
		{"schema", schemaConstraint(t, `{"type":"object","properties":{"n":{"type":"integer","minimum":-5,"maximum":300}},"required":["n"]}`), []string{`{"n": 300}`, `{"n":-5}`, "{\n  \"n\": 42\n}"}, []string{`{"n": 301}`, `{"n":-6}`, `{}`, `{"n": 1, "m": 2}`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, s := range tc.good {
				m := mustMatcher(t, c, tc.ct)
				tokenize(t, m, s)
				if !m.IsComplete() {
					t.Errorf("%q: not complete", s)
				}
				if err := m.Accept(eos); err != nil {
					t.Errorf("%q: EOS: %v", s, err)
				}
				if !m.IsDone() {
					t.Errorf("%q: not done after EOS", s)
				}
			}
			for _, s := range tc.bad {
				m := mustMatcher(t, c, tc.ct)
				if acceptsString(m, s) && m.IsComplete() {
					t.Errorf("%q accepted", s)
				}
			}
		})
	}
}

// acceptsString feeds s byte by byte (single-byte tokens 0..255).
func acceptsString(m *Matcher, s string) bool {
	for i := 0; i < len(s); i++ {
		if m.Accept(int32(s[i])) != nil {
			return false
		}
	}
	return true
}

func TestEOSOnlyWhenComplete(t *testing.T) {
	v := testVocab(t)
	c := NewCompiler(v, 8)
	m := mustMatcher(t, c, schemaConstraint(t, `{"type":"integer"}`))
	eos := v.EOS()[0]
	mask := NewBitmask(v.Size())
	m.Mask(mask)
	if mask.Allowed(eos) {
		t.Fatal("EOS allowed before any output")
	}
	if err := m.Accept(eos); !errors.Is(err, ErrRejected) {
		t.Fatalf("early EOS: %v", err)
	}
	acceptsString(m, "12")
	m.Mask(mask)
	if !mask.Allowed(eos) || !mask.Allowed('3') || mask.Allowed(' ') {
		t.Fatal("after 12: want EOS and digits, no trailing space")
	}
	// A complete boolean: only EOS is left, forced.
	m = mustMatcher(t, c, schemaConstraint(t, `{"type":"boolean"}`))
	acceptsString(m, "true")
	m.Mask(mask)
	if ids := mask.AllowedIDs(); len(ids) != 1 || ids[0] != eos || !m.IsDone() {
		t.Fatalf("after true: allowed %v, done %v", ids, m.IsDone())
	}
}

func TestRollbackReplay(t *testing.T) {
	v := testVocab(t)
	c := NewCompiler(v, 8)
	ct := schemaConstraint(t, `{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}},"b":{"type":"number"}}}`)
	rng := rand.New(rand.NewPCG(9, 9))
	for trial := 0; trial < 30; trial++ {
		m := mustMatcher(t, c, ct)
		var toks []int32
		mask := NewBitmask(v.Size())
		var masks [][]uint64
		for len(toks) < 40 && !m.IsDone() {
			m.Mask(mask)
			masks = append(masks, append([]uint64(nil), mask.Words()...))
			ids := allowedList(mask, v)
			tok := ids[rng.IntN(len(ids))]
			if v.isEOS(tok) {
				break
			}
			if err := m.Accept(tok); err != nil {
				t.Fatal(err)
			}
			toks = append(toks, tok)
		}
		if len(masks) == len(toks) {
			m.Mask(mask)
			masks = append(masks, append([]uint64(nil), mask.Words()...))
		}
		n := rng.IntN(len(toks) + 1)
		if err := m.Rollback(n); err != nil {
			t.Fatal(err)
		}
		if m.Accepted() != len(toks)-n {
			t.Fatalf("accepted %d want %d", m.Accepted(), len(toks)-n)
		}
		m.Mask(mask)
		if !equalWords(mask.Words(), masks[len(toks)-n]) {
			t.Fatalf("mask after rollback %d differs", n)
		}
		for _, tok := range toks[len(toks)-n:] {
			if err := m.Accept(tok); err != nil {
				t.Fatalf("replay: %v", err)
			}
		}
	}
	m := mustMatcher(t, c, ct)
	if err := m.Rollback(1); err == nil {
		t.Fatal("rollback past the start succeeded")
	}
}

func allowedList(mask *Bitmask, v *Vocab) []int32 {
	var ids []int32
	for id := int32(0); id < int32(v.Size()); id++ {
		if mask.Allowed(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

func equalWords(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func tokID(t *testing.T, v *Vocab, s string) int32 {
	t.Helper()
	for id, b := range v.toks {
		if string(b) == s && !v.special[id] {
			return int32(id)
		}
	}
	t.Fatalf("no token %q", s)
	return -1
}

func TestAfterReasoning(t *testing.T) {
	v := testVocab(t)
	c := NewCompiler(v, 8)
	ct := schemaConstraint(t, `{"type":"boolean"}`)
	ct.AfterReasoning = true
	m := mustMatcher(t, c, ct)
	mask := NewBitmask(v.Size())
	m.Mask(mask)
	if mask.Count() != v.Size() || !m.Dormant() {
		t.Fatal("dormant matcher must allow everything")
	}
	for _, s := range []string{"a", "b", "<", "/", "think", ">"} {
		for i := 0; i < len(s); i++ {
			if err := m.Accept(int32(s[i])); err != nil {
				t.Fatal(err)
			}
		}
	}
	if m.Dormant() {
		t.Fatal("spelled </think> byte by byte: still dormant")
	}
	if err := m.Accept('x'); err == nil {
		t.Fatal("constraint not active after </think>")
	}
	// One token that ends reasoning and starts the answer's whitespace.
	m = mustMatcher(t, c, ct)
	if err := m.Accept(tokID(t, v, "</think>\n\n")); err != nil || m.Dormant() {
		t.Fatalf("accept </think>\\n\\n: %v dormant=%v", err, m.Dormant())
	}
	tokenize(t, m, "false")
	if !m.IsDone() {
		t.Fatal("not done")
	}
	// The prompt already closed reasoning: constrain from the start.
	m3 := mustMatcher(t, c, ct)
	m3.EndReasoning()
	if m3.Dormant() || m3.Accept('x') == nil {
		t.Fatal("EndReasoning did not activate the constraint")
	}
	// Regex answers also get the blank lines after </think>.
	rc, err := constraint.Regex("[0-9]+")
	if err != nil {
		t.Fatal(err)
	}
	rc.AfterReasoning = true
	m2 := mustMatcher(t, c, rc)
	if err := m2.Accept(tokID(t, v, "</think>\n\n")); err != nil {
		t.Fatal(err)
	}
	tokenize(t, m2, "\n42")
	if !m2.IsComplete() {
		t.Fatal("regex answer after reasoning not complete")
	}
	if err := m.Rollback(m.Accepted()); err != nil || !m.Dormant() {
		t.Fatalf("rollback to start: %v dormant=%v", err, m.Dormant())
	}
}

func TestCompileCacheAndErrors(t *testing.T) {
	v := testVocab(t)
	c := NewCompiler(v, 2)
	ct := schemaConstraint(t, `{"type":"string"}`)
	g1, err := c.Compile(ct, time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := c.Compile(ct, time.Time{})
	if g1 != g2 {
		t.Fatal("cache miss on equal constraint")
	}
	if st := c.Stats(); st.Grammars != 1 || st.Terminals == 0 {
		t.Fatalf("stats %+v", st)
	}
	bad := ipc.Constraint{Kind: "grammar", Spec: "root ::= root \"a\" | \"b\"", Hash: "h-left"}
	if _, err := c.Compile(bad, time.Now().Add(5*time.Second)); err == nil || !strings.Contains(err.Error(), "left-recursive") {
		t.Fatalf("left recursion: %v", err)
	}
	if _, err := c.Compile(ipc.Constraint{Kind: "nope", Hash: "x"}, time.Time{}); err == nil {
		t.Fatal("unknown kind compiled")
	}
	// An already-passed deadline on an uncached constraint times out
	// (or, if compilation won the race, succeeds), never hangs.
	r := <-c.CompileAsync(schemaConstraint(t, `{"type":"array","items":{"type":"string","maxLength":900}}`), time.Now())
	if r.Err != nil && !errors.Is(r.Err, ErrCompileTimeout) {
		t.Fatalf("deadline: %v", r.Err)
	}
}
