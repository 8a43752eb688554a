package guide

import (
	"math/rand/v2"
	"testing"
)

// TestSlicedInnerEqualsFullWalk: for random states of string-like
// terminals, the sliced inner mask (slice set + walk of the rest) equals
// the plain walk over the whole trie, and the slices are actually used.
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
	}
	rng := rand.New(rand.NewPCG(1, 5))
	used := 0
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
			}
		}
	}
	if used == 0 {
		t.Fatal("no slice was ever used")
	}
}
