package guide

import "testing"

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
