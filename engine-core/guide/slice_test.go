package guide

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSlicedInnerEqualsFullWalk: for random states of string-like and
// identifier-like terminals, the sliced inner mask (slice set + walk of the
// rest) equals the plain walk over the whole trie, and the slices
// (including the letters-and-digits length classes) are actually used.
func TestSlicedInnerEqualsFullWalk(t *testing.T) {
	vocabs := []*Vocab{testVocab(t)}
	if !testing.Short() {
		for _, rv := range realVocabs(t) {
			vocabs = append(vocabs, rv.v)
		}
	}
	patterns := []string{
		`"(?:[^"\\\x00-\x1F\x7F]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"`,
		`"(?:[^"\\\x00-\x1F\x7F]|\\["\\/bfnrt]){0,40}"`,
		`"[a-z ]*"`,
		`-?(?:0|[1-9][0-9]*)`,
		`"(?:[^"\\\x00-\x1F\x7F]|\\["\\/bfnrt]){0,5}"`,
		`"(?:[^"\\\x00-\x1F\x7F]|\\["\\/bfnrt]){3,9}"`,
		`"(?:[^"\\\x00-\x1F\x7F]){0,100}x"`,
		`"name"`,
		`"[a-zA-Z0-9_%+-]{1,32}(?:\.[a-zA-Z0-9_%+-]{1,16}){0,2}@[a-zA-Z0-9]+"`,
		`"[a-zA-Z0-9]{2,6}"`,
		`[a-zA-Z0-9]*`,
		`"[A-Za-z0-9_-]{1,40}"`,
	}
	rng := rand.New(rand.NewPCG(1, 5))
	used, usedWord := 0, 0
	for _, v := range vocabs {
		for _, p := range patterns {
			term, err := newTerminal(p, 0)
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k < 6; k++ {
				// A random live state: feed a random prefix.
				q := term.d.start
				for _, c := range []byte(`"` + string([]byte("abc dé\\\"x")[:rng.IntN(11)])) {
					if n := term.d.next(q, c); n != deadState {
						q = n
					}
				}
				got := term.computeInner(q, v)
				want := term.walkInner(q, v, v.trie).finish()
				a := make([]uint64, (v.Size()+63)/64)
				b := make([]uint64, (v.Size()+63)/64)
				got.set.orInto(a)
				want.set.orInto(b)
				if !equalWords(a, b) {
					t.Fatalf("/%s/ state %d: sliced inner set differs from full walk", p, q)
				}
				if got.tr != v.trie {
					used++
				}
				if got.tr == v.counts[1].rest {
					usedWord++
				}
			}
		}
	}
	if used == 0 {
		t.Fatal("no slice was ever used")
	}
	if usedWord == 0 {
		t.Fatal("the letters-and-digits length classes were never used")
	}
}

// TestWalkInnerNaive checks the trie walk against a per-token run of the
// terminal automaton: the inner set is exactly the tokens that keep the
// terminal alive (equal-bytes tokens included), and the bounds are exactly
// the trie nodes with children where the terminal accepts.
func TestWalkInnerNaive(t *testing.T) {
	vocabs := []*Vocab{testVocab(t)}
	if !testing.Short() {
		vocabs = append(vocabs, realVocabs(t)[0].v)
	}
	patterns := []string{
		`"(?:[^"\\\x00-\x1F\x7F]|\\["\\/bfnrt]){0,6}"`,
		`-?(?:0|[1-9][0-9]*)`,
		`[a-zA-Z0-9_%+-]{1,4}@?`,
		`(?:true|false|null)`,
		`[ \t\n]{0,20}`,
	}
	for _, v := range vocabs {
		for _, p := range patterns {
			term, err := newTerminal(p, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, prefix := range []string{"", `"`, "1", "a", "ab"} {
				q := term.d.start
				for i := 0; i < len(prefix) && q != deadState; i++ {
					q = term.d.next(q, prefix[i])
				}
				if q == deadState || !live(q) {
					continue
				}
				w := term.walkInner(q, v, v.trie)
				for id, tok := range v.toks {
					s := q
					for i := 0; i < len(tok) && s != deadState; i++ {
						s = term.d.next(s, tok[i])
					}
					want := s != deadState && len(tok) > 0 && !v.special[id]
					if got := w.words[id>>6]&(1<<(uint(id)&63)) != 0; got != want {
						t.Fatalf("/%s/ after %q: token %d %q in set = %v, want %v", p, prefix, id, tok, got, want)
					}
				}
				// The bounds by a straightforward recursive walk.
				var bounds []int32
				var rec func(n int32, s int32)
				rec = func(n int32, s int32) {
					for c := n + 1; c < v.nodes[n].end; c = v.nodes[c].end {
						s2 := term.d.next(s, v.nodes[c].b)
						if s2 == deadState {
							continue
						}
						if accepting(s2) && v.nodes[c].end > c+1 {
							bounds = append(bounds, c)
						}
						rec(c, s2)
					}
				}
				rec(0, q)
				if !slices.Equal(bounds, w.im.bounds) {
					t.Fatalf("/%s/ after %q: bounds %v, want %v", p, prefix, w.im.bounds, bounds)
				}
			}
		}
	}
}
