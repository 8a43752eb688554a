package cuda

import (
	"errors"

	"github.com/sluice-llm/sluice/kernels"
)

// ErrNotCompiled is New's error in binaries built without -tags cuda.
var ErrNotCompiled = errors.New("CUDA backend not compiled in: build with -tags cuda (go tool task build:cuda, which makes bin/engine-core-cuda)")

// ErrNoDriver is returned by Open (wrapped) when no NVIDIA driver library
// (libcuda.so.1) can be loaded; the message names every place tried.
var ErrNoDriver = errors.New("cuda: no NVIDIA driver library")

// ErrNoDevice is returned by Open (wrapped) when the driver library loads
// but reports no usable GPU (cuInit fails, as it does with a link stub).
var ErrNoDevice = errors.New("cuda: no usable NVIDIA GPU")

// ErrNoCUBLAS is returned by Open (wrapped) when no cuBLAS library can be
// loaded; the message names every soname and path tried.
var ErrNoCUBLAS = errors.New("cuda: no cuBLAS library")

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
