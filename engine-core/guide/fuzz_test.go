package guide

import (
	"errors"
	"testing"

	"github.com/sluice-llm/sluice/constraint"
	"github.com/sluice-llm/sluice/ipc"
)

// FuzzMatcher drives a matcher with fuzzed token ids: it never panics,
// Accept succeeds exactly for the tokens the mask allows, and a rollback
// then replay restores the same mask.
func FuzzMatcher(f *testing.F) {
	v := testVocab(f)
	c := NewCompiler(v, 8)
	var cts []ipc.Constraint
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"array","items":{"type":"string","maxLength":4}}}}`,
		`{"anyOf":[{"type":"number","minimum":-3,"maximum":70},{"enum":["x","y\"z"]}]}`,
	} {
		ct, err := constraint.JSONSchema([]byte(s), true)
		if err != nil {
			f.Fatal(err)
		}
		cts = append(cts, ct)
	}
	cts = append(cts, constraint.JSONObject())
	g, _ := constraint.GBNF("root ::= (\"<\" root \">\" | [a-c])+")
	cts = append(cts, g)
	f.Add([]byte{0, '{', 'a', '"', 1, 2})
	f.Add([]byte{2, '{', '"', 'k', '"', ':', '1', '}', 0})
	f.Add([]byte{3, '<', 'a', '>', 'b'})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		m := mustMatcher(t, c, cts[int(data[0])%len(cts)])
		mask := NewBitmask(v.Size())
		var accepted []int32
		for i, b := range data[1:] {
			tok := int32(b)
			if i%5 == 4 {
				tok = 256 + int32(b)%int32(v.Size()-256)
			}
			m.Mask(mask)
			err := m.Accept(tok)
			if mask.Allowed(tok) != (err == nil) {
				t.Fatalf("token %q: mask %v, accept %v", v.toks[tok], mask.Allowed(tok), err)
			}
			if err != nil && !errors.Is(err, ErrRejected) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			if err == nil {
				accepted = append(accepted, tok)
			}
		}
		if len(accepted) == 0 {
			return
		}
		m.Mask(mask)
		before := append([]uint64(nil), mask.Words()...)
		n := int(data[0]) % (len(accepted) + 1)
		if err := m.Rollback(n); err != nil {
			t.Fatal(err)
		}
		for _, tok := range accepted[len(accepted)-n:] {
			if err := m.Accept(tok); err != nil {
				t.Fatalf("replay: %v", err)
			}
		}
		m.Mask(mask)
		if !equalWords(before, mask.Words()) {
			t.Fatal("mask differs after rollback and replay")
		}
	})
}
