package guide

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestRealVocabularies runs the end-to-end property on the real Llama-2,
// Llama-3 and Qwen3 vocabularies (SentencePiece byte fallback, byte-level
// BPE, multi-byte characters split across tokens): random schemas, random
// sampling under the mask, output validated by the oracle; on the first
// steps of each run the mask is compared with the naive per-token check.
func TestRealVocabularies(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: naive checks over 150k-token vocabularies")
	}
	rng := rand.New(rand.NewPCG(21, 22))
	gen := &schemaGen{rng: rng}
	for _, rv := range realVocabs(t) {
		t.Run(rv.name, func(t *testing.T) {
			c := NewCompiler(rv.v, 16)
			for i := 0; i < 6; i++ {
				doc := gen.document()
				ct := schemaConstraint(t, doc)
				sch := validator(t, doc)
				m := mustMatcher(t, c, ct)
				// Naive check on the first 6 masks of the run.
				out, ok := decodeChecked(t, m, rng, 6)
				if !ok {
					t.Fatalf("schema %s: no EOS: %q", doc, out)
				}
				inst, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
				if err != nil {
					t.Fatalf("schema %s: %q does not parse: %v", doc, out, err)
				}
				if err := sch.Validate(inst); err != nil {
					t.Fatalf("schema %s: %q invalid: %v", doc, out, err)
				}
			}
		})
	}
}

// decodeChecked is decodeRandom with the naive check on the first n
// steps only, and a stronger closing bias (real vocabularies have many
// tokens per state).
func decodeChecked(t *testing.T, m *Matcher, rng *rand.Rand, n int) (string, bool) {
	v := m.g.vocab
	mask := NewBitmask(v.Size())
	var out strings.Builder
	for step := 0; step < 3000; step++ {
		m.Mask(mask)
		if step < n {
			checkMaskNaive(t, m, mask)
		}
		var allowed, closing []int32
		for w, word := range mask.Words() {
			for word != 0 {
				id := int32(w*64 + trailingZeros(word))
				word &= word - 1
				allowed = append(allowed, id)
				if v.isEOS(id) || strings.ContainsAny(string(v.toks[id]), "\"}]") {
					closing = append(closing, id)
				}
			}
		}
		pick := allowed
		if len(closing) > 0 && rng.Float64() < 0.6 {
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
