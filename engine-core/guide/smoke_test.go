package guide

import (
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/constraint"
)

// TestSmoke decodes a small schema and a regex at random, checking every
// mask against the naive per-token check and that each run ends in EOS.
func TestSmoke(t *testing.T) {
	v := testVocab(t)
	c := NewCompiler(v, 8)
	ct := schemaConstraint(t, `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"]}`)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20; i++ {
		m := mustMatcher(t, c, ct)
		if out, ok := decodeRandom(t, m, rng, 500, 0.3, true); !ok {
			t.Fatalf("no EOS: %q", out)
		}
	}
	rc, _ := constraint.Regex(`[a-c]+x?`)
	m := mustMatcher(t, c, rc)
	if out, ok := decodeRandom(t, m, rng, 500, 0.3, true); !ok {
		t.Fatalf("regex: no EOS: %q", out)
	}
}
