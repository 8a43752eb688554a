package guide

import (
	"math/rand/v2"
	"testing"
)

func TestWarm(t *testing.T) {
	c := NewCompiler(testVocab(t), 4)
	if err := c.Warm(); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	n := len(c.terms)
	c.mu.Unlock()
	if n == 0 {
		t.Fatal("no terminal warmed")
	}
	for _, term := range c.terms {
		term.mu.Lock()
		k := len(term.inner)
		term.mu.Unlock()
		if k == 0 && term.pattern != reasoningGap {
			t.Errorf("terminal /%s/: no inner mask computed", term.pattern)
		}
	}
}

// TestLexemeBudget: past the lexeme cache budget, masks are still exact
// (checked against the naive per-token check) but nothing is kept.
func TestLexemeBudget(t *testing.T) {
	v := testVocab(t)
	c := NewCompilerWithOptions(v, Options{LexemeCacheBytes: 1, CompileWorkers: 1})
	m := mustMatcher(t, c, schemaConstraint(t, `{"type":"object","properties":{"s":{"type":"string"}}}`))
	if _, ok := decodeRandom(t, m, rand.New(rand.NewPCG(1, 1)), 500, 0.5, true); !ok {
		t.Fatal("no EOS")
	}
	for _, term := range c.terms {
		if len(term.inner) != 0 {
			t.Fatalf("terminal /%s/ kept %d masks over budget", term.pattern, len(term.inner))
		}
	}
	if c.budget.Load() != 1 {
		t.Fatalf("budget leaked: %d", c.budget.Load())
	}
}
