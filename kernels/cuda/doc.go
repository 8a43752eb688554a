// Package cuda is the NVIDIA GPU backend of kernels.Backend: weights, the
// paged KV cache and activations in device memory, cuBLAS for the F32
// GEMMs, and CUDA C kernels (the .cu files beside this package, compiled by
// nvcc into fatbins that the build embeds) for RMSNorm, RoPE, SiLU-gate,
// softmax, paged attention, embedding and row gathers, Q8_0 matrix
// products, and greedy / top-k / top-p sampling.
//
// The backend exists only in binaries built with -tags cuda (go tool task
// build:cuda, which first runs scripts/cuda-fatbin.sh): without the tag,
// New returns ErrNotCompiled and nothing CUDA is linked. Even with it, the
// binary links neither libcuda nor libcublas: Open loads the driver
// (libcuda.so.1) and cuBLAS (libcublas.so.13, .12 or .11, or the pip wheel
// nvidia-cublas in a Python site folder) with dlopen, so one build runs on
// any driver ≥ 520, and on a machine without a GPU Open fails with an error
// (ErrNoDriver, ErrNoDevice, ErrNoCUBLAS) naming what it tried.
//
// All work goes to one CUDA stream per backend, in program order; host
// slices given to ops (tokens, positions, block tables) are copied to the
// device before the op returns, and ToHost waits for the stream.
package cuda
