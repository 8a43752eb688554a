package guide

import (
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/constraint"
)

// TestTerminalStatesMatchesNFA: constraint.TerminalStates (the frontend's
// size check, which counts without building) agrees exactly with the
// states compileNFA builds, and both refuse `\p{L}{1000}` (issue 21 item 7).
func TestTerminalStatesMatchesNFA(t *testing.T) {
	patterns := []string{
		`a`, `abc`, `(?i)k`, `[a-z]+`, `\p{L}`, `\p{Greek}{3,5}`, `.`, `(?s).*`, `a|b|c`, `(ab)?c*`,
		`[^"\\]*`, `\d{16}`, `[\x{80}-\x{10FFFF}]`, `x{0}`, `(?:)`, `[^\x00-\x{10FFFF}]`, `日本語?`,
		`"([^"\\]|\\["\\/bfnrt])*"`, `\p{L}{10}`, `(a|bc){2,7}d`,
	}
	for _, p := range patterns {
		n, err := constraint.TerminalStates(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		nfa, err := compileNFA(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if n != len(nfa.states) {
			t.Errorf("%s: TerminalStates %d, NFA has %d states", p, n, len(nfa.states))
		}
	}
	for _, p := range []string{`\p{L}{1000}`, `^\p{L}{1000}$`} {
		if _, err := compileNFA(p); err == nil {
			t.Fatalf("%s: compileNFA accepted it", p)
		} else if len(err.Error()) > 200 {
			t.Fatalf("%s: engine error is %d bytes: %.80s…", p, len(err.Error()), err)
		}
		n, _ := constraint.TerminalStates(p)
		if n <= constraint.MaxTerminalStates {
			t.Fatalf("%s: TerminalStates %d within the limit", p, n)
		}
		_, err := constraint.Regex(p)
		if err == nil || !strings.Contains(err.Error(), "too complex") || len(err.Error()) > 200 {
			t.Fatalf("%s: constraint.Regex error %v", p, err)
		}
	}
}
