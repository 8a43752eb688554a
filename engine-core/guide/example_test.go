package guide_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluice-llm/sluice/constraint"
	"github.com/sluice-llm/sluice/engine-core/guide"
)

// Example shows the whole flow with a toy vocabulary: the frontend
// validates and canonicalises the schema, the engine compiles it once and
// per step masks, samples (here: the longest allowed token, the later id on
// ties) and accepts.
func Example() {
	// Toy vocabulary: a few multi-byte tokens, then EOS.
	words := []string{`{"`, `ok`, `":`, ` `, `true`, `false`, `}`, `"`, `x`, "</s>"}
	toks := make([][]byte, len(words))
	for i, w := range words {
		toks[i] = []byte(w)
	}
	eos := int32(len(words) - 1)
	vocab, err := guide.NewVocab(toks, []int32{eos}, func(id int32) bool { return id == eos })
	if err != nil {
		panic(err)
	}

	// Frontend: validate and canonicalise (a 400 on error).
	ct, err := constraint.JSONSchema(json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false}`), true)
	if err != nil {
		panic(err)
	}

	// Engine: compile (cached by ct.Hash), then one matcher per request.
	c := guide.NewCompiler(vocab, 64)
	m, err := c.Matcher(ct, time.Now().Add(2*time.Second))
	if err != nil {
		panic(err)
	}
	mask := guide.NewBitmask(vocab.Size())
	out := ""
	for !m.IsDone() {
		m.Mask(mask)
		next := int32(-1)
		for id := int32(0); id < int32(vocab.Size()); id++ {
			if mask.Allowed(id) && (next < 0 || len(toks[id]) >= len(toks[next])) {
				next = id
			}
		}
		if err := m.Accept(next); err != nil {
			panic(err)
		}
		if next != eos {
			out += words[next]
		}
	}
	fmt.Println(out)
	// Output: {"ok":false}
}
