package guide

import (
	"math/rand/v2"
	"sync"
	"testing"
)

// TestConcurrentMatchers shares one compiler (grammars, lazy automata,
// caches) between goroutines; run with -race.
func TestConcurrentMatchers(t *testing.T) {
	v := testVocab(t)
	c := NewCompiler(v, 4)
	schemas := []string{
		`{"type":"object","properties":{"s":{"type":"string","maxLength":12},"n":{"type":"number"}}}`,
		`{"type":"array","items":{"enum":["a","b\"c",1]}}`,
	}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; i < 10; i++ {
				m := mustMatcher(t, c, schemaConstraint(t, schemas[(w+i)%len(schemas)]))
				if _, ok := decodeRandom(t, m, rng, 2000, 0.5, false); !ok {
					t.Error("no EOS")
					return
				}
			}
		}(w)
	}
	wg.Wait()
}

// fakeTokenizer adapts the test vocabulary to TokenSource.
type fakeTokenizer struct {
	v *Vocab
}

func (f fakeTokenizer) TokenBytes(id int32) []byte { return f.v.toks[id] }
func (f fakeTokenizer) IsSpecial(id int32) bool    { return f.v.special[id] }
func (f fakeTokenizer) VocabSize() int             { return f.v.Size() }
func (f fakeTokenizer) EOS() int32                 { return f.v.eos[0] }

func TestFromTokenizer(t *testing.T) {
	v := testVocab(t)
	w, err := FromTokenizer(fakeTokenizer{v: v}, 'x')
	if err != nil {
		t.Fatal(err)
	}
	if w.Size() != v.Size() || len(w.EOS()) != 2 || !w.special['x'] || w.Nodes() != v.Nodes() {
		t.Fatalf("size %d eos %v nodes %d/%d", w.Size(), w.EOS(), w.Nodes(), v.Nodes())
	}
}
