package sample

import "github.com/sluice-llm/sluice/ipc"

// Input is what the sampler needs to know about one request to pick its next
// token. Executors build one per sampled row of logits.
type Input struct {
	Params *ipc.SamplingParams
	// History is the prompt followed by the tokens generated so far
	// (read-only; used by penalties and bad_words).
	History   []int32
	NumPrompt int
	// Seed is the request's effective seed (its own, or one the engine drew
	// at ADD). Randomness for output position p is derived from (Seed, p)
	// alone, so seeded sampling is reproducible whatever the batch holds.
	Seed uint64
	// Mask, when not nil, restricts the choice to the allowed token ids
	// (structured outputs). Nil means every token is allowed.
	Mask Mask
	// EOS are the model's end-of-sequence ids. While fewer than
	// Params.MinTokens tokens have been generated the sampler suppresses
	// them (unless Params.IgnoreEOS) together with Params.StopTokenIDs,
	// as vLLM's min-tokens logits processor does.
	EOS []int32
}

// Mask restricts sampling to a set of token ids.
type Mask interface {
	// Allowed reports whether token id may be sampled.
	Allowed(id int32) bool
	// AllowedIDs returns the allowed ids when they are few (sparse form),
	// or nil when the set is large and Allowed should be used instead.
	AllowedIDs() []int32
}

// Result is the sampler's choice for one row.
type Result struct {
	Token int32
	// Logprobs is filled when Params.Logprobs >= 0.
	Logprobs ipc.TokenLogprobs
}

// BitsMask is a Mask that also exposes its dense bitset (bit i of word i/64
// set when token i is allowed); the sampler then skips per-id calls.
type BitsMask interface {
	Mask
	Words() []uint64
}
