package sched

import "github.com/sluice-llm/sluice/engine-core/sample"

// Batch is the work of one engine step, handed by the scheduler to an
// executor (the CPU runner, the CUDA runner or the simulated accelerator).
type Batch struct {
	Step uint64
	Seqs []SeqWork
	// NumTokens is the sum of len(Seqs[i].Tokens).
	NumTokens int
}

// SeqWork is one request's share of a step: a prefill chunk or one decode
// token.
type SeqWork struct {
	ReqID string
	// Tokens are the token ids to compute this step.
	Tokens []int32
	// StartPos is the absolute position of Tokens[0]; positions below it are
	// already in the KV cache (computed earlier or found in the prefix cache).
	StartPos int
	// BlockTable lists the request's KV block ids, covering at least
	// positions [0, StartPos+len(Tokens)). Position p lives in block
	// BlockTable[p/blockSize] at offset p%blockSize.
	BlockTable []int32
	// WindowTable is the table of the model's sliding-window layers when
	// the scheduler keeps one (Config.SlidingWindow > 0; nil otherwise):
	// as long as BlockTable, block ids from the same pool, but entries for
	// blocks wholly before StartPos-SlidingWindow+1 are kvcache.NoBlock
	// (given back: those layers never read them).
	WindowTable []int32
	// Sample is true when this step ends at the request's last known token,
	// so the executor must sample the next token from the last row's logits.
	Sample bool
	// In describes the request to the sampler (valid when Sample).
	In sample.Input
}

// Executor runs one step. Implementations: engine-core/runner (real models),
// engine-core/simexec (the simulated accelerator).
type Executor interface {
	// Execute computes the batch and writes, for every SeqWork with Sample
	// set, the sampled token into out[i] (len(out) == len(b.Seqs); entries
	// for seqs without Sample are left untouched).
	Execute(b *Batch, out []sample.Result) error
	// Release drops any per-request state the executor keeps (for example a
	// persistent-batch slot) once the request has finished or was preempted.
	Release(reqID string)
}
