// Package quant holds ggml's weight encodings as plain Go: IEEE half and
// bfloat16 conversions, and the block quantizations (Q8_0, Q4_0, and the
// k-quants Q4_K, Q5_K, Q6_K): reference encoders and decoders written from
// ggml's published block layouts, bit for bit. It is a leaf: the model-file
// writers (modelfile) and the compute backends (kernels) both use it, and
// fast kernels are checked against it.
package quant
