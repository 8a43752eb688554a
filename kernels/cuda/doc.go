// Package cuda is the NVIDIA GPU backend of kernels.Backend: weights, the
// paged KV cache and activations in device memory, cuBLAS for the F32
// GEMMs, and CUDA C kernels (the .cu files beside this package, compiled by
// nvcc into fatbins that the build embeds) for RMSNorm, RoPE, SiLU-gate,
// softmax, paged attention, embedding and row gathers, Q8_0 matrix
// products, and greedy / top-k / top-p sampling.
//
// The backend exists only in binaries built with -tags cuda (go tool task
// build:cuda, which first runs scripts/cuda-fatbin.sh). It links against
// libcuda and libcublas through gorgonia.org/cu, whose package init calls
// cuInit and exits the process when no GPU is present, so the CPU build
// never imports it: without the tag, New returns ErrNotCompiled.
//
// All work goes to one CUDA stream per backend, in program order; host
// slices given to ops (tokens, positions, block tables) are copied to the
// device before the op returns, and ToHost waits for the stream.
package cuda
