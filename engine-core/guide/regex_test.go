package guide

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// randPattern builds a random RE2 pattern over a small alphabet with
// multi-byte characters, classes, repeats and alternation.
func randPattern(r *rand.Rand, depth int) string {
	atoms := []string{"a", "b", "é", "日", ".", "[a-c]", "[^a]", "[é-ë]", `\d`, "[日-本]", "(?i:a)", `\n`, "x*", ""}
	if depth <= 0 {
		return atoms[r.IntN(len(atoms))]
	}
	sub := func() string { return randPattern(r, depth-1) }
	switch r.IntN(7) {
	case 0:
		return sub() + sub()
	case 1:
		return "(?:" + sub() + "|" + sub() + ")"
	case 2:
		return "(?:" + sub() + ")*"
	case 3:
		return "(?:" + sub() + ")+"
	case 4:
		return "(?:" + sub() + ")?"
	case 5:
		lo := r.IntN(3)
		return "(?:" + sub() + "){" + string(rune('0'+lo)) + "," + string(rune('0'+lo+r.IntN(3))) + "}"
	}
	return sub() + sub() + sub()
}

func randString(r *rand.Rand) string {
	alpha := []string{"a", "b", "c", "é", "ë", "日", "本", "\n", "1", "A", "x"}
	var sb strings.Builder
	for range r.IntN(7) {
		sb.WriteString(alpha[r.IntN(len(alpha))])
	}
	return sb.String()
}

// TestDFAAgreesWithRegexp: the lazy byte DFA's whole-string match equals
// Go's regexp on random patterns and strings, including every byte prefix
// (the DFA must stay alive exactly on prefixes of matches).
func TestDFAAgreesWithRegexp(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 400; i++ {
		p := randPattern(r, 3)
		n, err := compileNFA(p)
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		d := newDFA(n, 0)
		re := regexp.MustCompile(`^(?:` + p + `)$`)
		for j := 0; j < 60; j++ {
			s := randString(r)
			if got, want := d.matchString(s), re.MatchString(s); got != want {
				t.Fatalf("pattern %q string %q: dfa %v regexp %v", p, s, got, want)
			}
		}
	}
}

// TestUTF8Sequences checks the range splitter against utf8 for ranges
// around every encoding boundary: a rune is in the range iff its encoding
// matches one of the sequences, and no sequence matches a non-encoding.
func TestUTF8Sequences(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	edges := []rune{0, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xD800, 0xDFFF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF}
	for i := 0; i < 200; i++ {
		lo := edges[r.IntN(len(edges))] + rune(r.IntN(300)) - 150
		hi := lo + rune(r.IntN(70000))
		lo, hi = max(lo, 0), min(hi, utf8.MaxRune)
		if lo > hi {
			continue
		}
		var seqs [][]byteRange
		utf8Sequences(lo, hi, func(s []byteRange) { seqs = append(seqs, append([]byteRange(nil), s...)) })
		in := func(b []byte) bool {
			for _, s := range seqs {
				if len(s) != len(b) {
					continue
				}
				ok := true
				for k := range s {
					ok = ok && s[k].lo <= b[k] && b[k] <= s[k].hi
				}
				if ok {
					return true
				}
			}
			return false
		}
		for k := 0; k < 300; k++ {
			c := rune(r.IntN(utf8.MaxRune + 1))
			if k%2 == 0 {
				c = lo + rune(r.IntN(int(hi-lo)+1))
			}
			want := c >= lo && c <= hi && utf8.ValidRune(c)
			if !utf8.ValidRune(c) {
				continue
			}
			if got := in(utf8.AppendRune(nil, c)); got != want {
				t.Fatalf("[%x,%x] rune %x: got %v want %v", lo, hi, c, got, want)
			}
		}
		// No sequence accepts an invalid encoding.
		for _, s := range seqs {
			b := make([]byte, len(s))
			for k := range s {
				b[k] = s[k].lo
			}
			if !utf8.Valid(b) {
				t.Fatalf("[%x,%x]: sequence %v accepts invalid %x", lo, hi, s, b)
			}
		}
	}
}

// FuzzDFA compares the DFA with regexp on fuzzed patterns and strings.
func FuzzDFA(f *testing.F) {
	f.Add("a(b|c)*", "abcb")
	f.Add("[^\"\\\\]{0,3}", "xé")
	f.Add("(?i:k)", "\u212a")
	f.Fuzz(func(t *testing.T, p, s string) {
		re, err := regexp.Compile(`^(?:` + p + `)$`)
		if err != nil || !utf8.ValidString(s) || len(p) > 64 {
			return
		}
		n, err := compileNFA(p)
		if err != nil {
			return // anchors and other assertions are rejected
		}
		d := newDFA(n, 0)
		if got, want := d.matchString(s), re.MatchString(s); got != want && !d.overflow.Load() {
			t.Fatalf("pattern %q string %q: dfa %v regexp %v", p, s, got, want)
		}
	})
}
