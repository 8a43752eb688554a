package guide

import (
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/outputproc/constraint"
)

func TestSmoke(t *testing.T) {
	v := testVocab(t)
	c := NewCompiler(v, 8)
	ct := schemaConstraint(t, `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"]}`)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20; i++ {
		m := mustMatcher(t, c, ct)
		out, ok := decodeRandom(t, m, rng, 500, 0.3, true)
		t.Logf("%v %q", ok, out)
	}
	rc, _ := constraint.Regex(`[a-c]+x?`)
	m := mustMatcher(t, c, rc)
	out, ok := decodeRandom(t, m, rng, 500, 0.3, true)
	t.Logf("%v %q", ok, out)
}
