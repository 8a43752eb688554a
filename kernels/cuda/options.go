package cuda

import (
	"errors"

	"github.com/sluice-llm/sluice/kernels"
)

// ErrNotCompiled is New's error in binaries built without -tags cuda.
var ErrNotCompiled = errors.New("CUDA backend not compiled in: build with -tags cuda (go tool task build:cuda, which makes bin/engine-core-cuda)")

// Options configures the CUDA backend.
type Options struct {
	// Device is the CUDA device ordinal (default 0).
	Device int
	// AllowTF32 lets cuBLAS round F32 GEMM inputs to TF32 on tensor cores
	// (Ampere and later): much faster, about 1e-3 relative error. Off by
	// default, so results match the CPU backend to F32 rounding.
	AllowTF32 bool
}

// SampleParams is one row's sampling setup for on-device sampling.
type SampleParams struct {
	// Temperature divides the logits; <= 0 means greedy.
	Temperature float32
	// TopK keeps the K largest logits (ties at the boundary are all kept);
	// <= 0 keeps all.
	TopK int32
	// TopP keeps the smallest set of largest logits whose probability
	// reaches TopP; <= 0 or >= 1 keeps all.
	TopP float32
	// U is a uniform random number in [0, 1) from the caller's seeded
	// generator; the draw is the inverse CDF at U, in vocabulary order.
	U float32
}

// DeviceSampler is implemented by backends that pick tokens on the device,
// so only the ids and their logprobs come back to the host.
type DeviceSampler interface {
	// SampleRows draws one token from each of the first n rows of logits.
	// ids and logprobs receive n values; logprobs are the log-softmax of
	// the raw logits at the chosen ids.
	SampleRows(logits kernels.Tensor, n int, params []SampleParams, ids []int32, logprobs []float32) error
	// Greedy sets ids to the argmax of each of the first n rows of logits.
	Greedy(logits kernels.Tensor, n int, ids []int32, logprobs []float32) error
}
