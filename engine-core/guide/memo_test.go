package guide

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluice-llm/sluice/constraint"
	"github.com/sluice-llm/sluice/ipc"
)

// TestMemoMatchesDirect checks the transition memo: matchers that move
// through memoized states (steps whose threads are only rebuilt when
// needed) give, at every step, the same mask, IsDone, IsComplete and
// Allows answers as a reference matcher of the same grammar without memo
// (every Accept runs the parser), including after rollbacks into
// memoized steps, a rejected token, and a memo that starts over when it
// reaches its byte bound.
func TestMemoMatchesDirect(t *testing.T) {
	v := testVocab(t)
	rng := rand.New(rand.NewPCG(31, 32))
	gen := &schemaGen{rng: rng}
	var cts []ipc.Constraint
	for range 12 {
		cts = append(cts, schemaConstraint(t, gen.document()))
	}
	cts = append(cts, constraint.JSONObject())
	if g, err := constraint.GBNF("root ::= (\"<\" root \">\" | [a-c])+"); err == nil {
		cts = append(cts, g)
	}
	memoHits := 0
	for ci, ct := range cts {
		for _, limit := range []int{8 << 20, 4 << 10} {
			c := NewCompiler(v, 8)
			g, err := c.build(ct)
			if err != nil {
				t.Fatal(err)
			}
			g.memo = newMemo(limit)
			ref := *g
			ref.memo = newMemo(0) // learns nothing: the parser runs every time
			ref.masks = newMaskCache(8 << 20)
			// Record a random decode on the reference.
			toks := acceptedTokens(t, &ref, rng, 200)
			if len(toks) == 0 {
				continue
			}
			// Reference masks at every step.
			rm := ref.NewMatcher(false)
			type obs struct {
				words          []uint64
				done, complete bool
				key            string
			}
			var want []obs
			mask := NewBitmask(v.Size())
			for _, tok := range toks {
				rm.Mask(mask)
				want = append(want, obs{slices.Clone(mask.Words()), rm.IsDone(), rm.IsComplete(), rm.node().key})
				if err := rm.Accept(tok); err != nil {
					t.Fatal(err)
				}
			}
			check := func(m *Matcher, i int, pass int) {
				t.Helper()
				m.Mask(mask)
				w := want[i]
				if k := m.node().key; k != w.key {
					t.Fatalf("constraint %d pass %d step %d: state %q, want %q", ci, pass, i, k, w.key)
				}
				if !slices.Equal(mask.Words(), w.words) || m.IsDone() != w.done || m.IsComplete() != w.complete {
					t.Fatalf("constraint %d limit %d pass %d step %d of %d: mask %v want %v, done %v/%v complete %v/%v", ci, limit, pass, i, len(toks), mask.Words(), w.words, m.IsDone(), w.done, m.IsComplete(), w.complete)
				}
				if ids := mask.AllowedIDs(); ids != nil && len(ids) != mask.Count() {
					t.Fatalf("sparse ids %d != count %d", len(ids), mask.Count())
				}
			}
			for pass := range 3 {
				m := g.NewMatcher(false)
				for i := 0; i < len(toks); i++ {
					check(m, i, pass)
					if rng.IntN(4) == 0 {
						// Allows materializes the step's threads.
						probe := int32(rng.IntN(v.Size() - 1)) // not EOS (the last id)
						wantOK := want[i].words[probe>>6]&(1<<(uint(probe)&63)) != 0
						if m.Allows(probe) != wantOK {
							t.Fatalf("constraint %d pass %d step %d: Allows(%d) = %v", ci, pass, i, probe, !wantOK)
						}
						if !wantOK {
							if err := m.Accept(probe); err == nil {
								t.Fatalf("constraint %d step %d: rejected token %d accepted", ci, i, probe)
							}
						}
					}
					if err := m.Accept(toks[i]); err != nil {
						t.Fatalf("constraint %d pass %d step %d: %v", ci, pass, i, err)
					}
					if pass > 0 && limit > 1<<20 && m.steps[len(m.steps)-1].off < 0 {
						memoHits++
					}
					if i > 0 && rng.IntN(8) == 0 {
						back := 1 + rng.IntN(min(i, 5))
						if err := m.Rollback(back); err != nil {
							t.Fatal(err)
						}
						i -= back
						if m.Accepted() != i+1 {
							t.Fatalf("accepted %d after rollback to %d", m.Accepted(), i+1)
						}
					}
				}
			}
		}
	}
	if memoHits == 0 {
		t.Fatal("no step was served by the memo")
	}
	t.Logf("%d steps served by the memo", memoHits)
}

// acceptedTokens decodes at random on a fresh matcher of g and returns
// the accepted tokens (EOS included when reached).
func acceptedTokens(t *testing.T, g *Grammar, rng *rand.Rand, maxSteps int) []int32 {
	t.Helper()
	m := g.NewMatcher(false)
	v := g.vocab
	mask := NewBitmask(v.Size())
	var toks []int32
	for range maxSteps {
		m.Mask(mask)
		var allowed, closing []int32
		for w, word := range mask.Words() {
			for word != 0 {
				id := int32(w*64 + trailingZeros(word))
				word &= word - 1
				allowed = append(allowed, id)
				if tb := v.toks[id]; v.isEOS(id) || slices.ContainsFunc(tb, func(b byte) bool { return b == '"' || b == '}' || b == ']' }) {
					closing = append(closing, id)
				}
			}
		}
		if len(allowed) == 0 {
			break
		}
		pick := allowed
		if len(closing) > 0 && rng.Float64() < 0.3 {
			pick = closing
		}
		tok := pick[rng.IntN(len(pick))]
		if err := m.Accept(tok); err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
		if v.isEOS(tok) {
			break
		}
	}
	return toks
}
