package kernels

// SampleParams is one row's sampling setup for on-device sampling (see
// DeviceSampler).
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

// DeviceSampler is implemented by backends that pick tokens where the
// logits live (the CUDA backend), so only the sampled ids and their
// logprobs travel back to the host. Executors find it with a type
// assertion on their Backend.
type DeviceSampler interface {
	// SampleRows draws one token from each of the first n rows of logits.
	// ids and logprobs receive n values; logprobs are the log-softmax of
	// the raw logits at the chosen ids.
	SampleRows(logits Tensor, n int, params []SampleParams, ids []int32, logprobs []float32) error
	// Greedy sets ids to the argmax of each of the first n rows of logits
	// (the lowest id on ties, NaNs ignored) and logprobs to its
	// log-softmax value.
	Greedy(logits Tensor, n int, ids []int32, logprobs []float32) error
}
