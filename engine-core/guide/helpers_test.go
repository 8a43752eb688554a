package guide

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/constraint"
	"github.com/sluice-llm/sluice/ipc"
)

// testTokens is a small vocabulary with every single byte (so any output
// can be spelled, as with byte fallback) plus multi-byte tokens that cross
// JSON structure boundaries, the cases that stress the trie walk.
var testTokens = []string{
	`{"`, `"}`, `":`, `": `, `",`, `", "`, `, "`, `true`, `false`, `null`, `  `, "\n", "\n  ",
	`123`, `0.`, `-1`, `e+`, `abc`, `"abc"`, ` {`, `[{`, `}]`, `"}]`, `"]`, `["`, `[]`, `{}`,
	`\n`, `\"`, `\u00`, `é`, "\xc3", "\xa9", `日本`, `</think>`, "</think>\n\n", `name`, `"name": "`,
	`2024-`, `-01-`, `T12:`, `:00Z`, `@ex`, `.com`, `a-`, `xyz"`, `"x`, `},{"`, `1,`, `],`, `null}`,
}

// testVocab returns the test vocabulary: ids 0..255 are the bytes, then
// testTokens, then EOS "</s>" (special).
func testVocab(t testing.TB) *Vocab {
	t.Helper()
	var toks [][]byte
	for b := 0; b < 256; b++ {
		toks = append(toks, []byte{byte(b)})
	}
	for _, s := range testTokens {
		toks = append(toks, []byte(s))
	}
	toks = append(toks, []byte("</s>"))
	eos := int32(len(toks) - 1)
	v, err := NewVocab(toks, []int32{eos}, func(id int32) bool { return id == eos })
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// mustMatcher compiles a constraint and returns a matcher.
func mustMatcher(t testing.TB, c *Compiler, ct ipc.Constraint) *Matcher {
	t.Helper()
	m, err := c.Matcher(ct, time.Now().Add(10*time.Second))
	if err != nil {
		t.Fatalf("matcher: %v", err)
	}
	return m
}

func schemaConstraint(t testing.TB, schema string) ipc.Constraint {
	t.Helper()
	ct, err := constraint.JSONSchema(json.RawMessage(schema), true)
	if err != nil {
		t.Fatalf("constraint %s: %v", schema, err)
	}
	return ct
}

// decodeRandom samples allowed tokens at random until EOS, preferring
// (with probability closeBias) tokens that close structures or end
// strings so that outputs stay short. It checks at every step that the
// mask equals the naive per-token check when check is set.
func decodeRandom(t testing.TB, m *Matcher, rng *rand.Rand, maxSteps int, closeBias float64, check bool) (string, bool) {
	t.Helper()
	v := m.g.vocab
	mask := NewBitmask(v.Size())
	var out strings.Builder
	var allowed, closing []int32
	for step := 0; step < maxSteps; step++ {
		m.Mask(mask)
		if check {
			checkMaskNaive(t, m, mask)
		}
		allowed, closing = allowed[:0], closing[:0]
		for id := int32(0); id < int32(v.Size()); id++ {
			if !mask.Allowed(id) {
				continue
			}
			allowed = append(allowed, id)
			if v.isEOS(id) || strings.ContainsAny(string(v.toks[id]), "\"}]") {
				closing = append(closing, id)
			}
		}
		if len(allowed) == 0 {
			t.Fatalf("empty mask after %q", out.String())
		}
		pick := allowed
		if len(closing) > 0 && rng.Float64() < closeBias {
			pick = closing
		}
		tok := pick[rng.IntN(len(pick))]
		if err := m.Accept(tok); err != nil {
			t.Fatalf("accept %q after %q: %v", v.toks[tok], out.String(), err)
		}
		if v.isEOS(tok) {
			return out.String(), true
		}
		out.Write(v.toks[tok])
	}
	return out.String(), false
}

// checkMaskNaive compares a mask with Allows on every token.
func checkMaskNaive(t testing.TB, m *Matcher, mask *Bitmask) {
	t.Helper()
	v := m.g.vocab
	for id := int32(0); id < int32(v.Size()); id++ {
		if got, want := mask.Allowed(id), m.Allows(id); got != want {
			t.Fatalf("token %d %q: mask says %v, naive check says %v", id, v.toks[id], got, want)
		}
	}
	if ids := mask.AllowedIDs(); ids != nil {
		if len(ids) != mask.Count() {
			t.Fatalf("sparse ids %d != count %d", len(ids), mask.Count())
		}
		for _, id := range ids {
			if !mask.Allowed(id) {
				t.Fatalf("sparse id %d not in bits", id)
			}
		}
	}
}
