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

// SampleParams is one row's sampling setup for on-device sampling; it is
// kernels.SampleParams, so executors need not import this package.
type SampleParams = kernels.SampleParams

// DeviceSampler is implemented by backends that pick tokens on the device,
// so only the ids and their logprobs come back to the host; it is
// kernels.DeviceSampler, which executors type-assert on.
type DeviceSampler = kernels.DeviceSampler
