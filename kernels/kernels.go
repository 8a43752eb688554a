// Package kernels is the compute vocabulary of the engine: a small Backend
// interface over device-resident tensors (what a transformer forward pass
// needs, no more), the host tensor type that CPU backends share, and plain,
// obviously-correct reference kernels on Go slices.
//
// The reference kernels are the specification. Fast backends (kernels/cpu,
// a CUDA backend later) are cross-checked against them in tests. The Ref
// backend runs the reference kernels on one goroutine; it is slow and exists
// to check the fast backends end to end.
//
// Shapes: every tensor is 2-D and row-major, rows × cols. Weight matrices
// are stored as PyTorch stores nn.Linear weights: [out × in], so MatMul
// computes out = x · wᵀ. Activations are allocated once for the largest
// batch and the ops take n, the number of rows in use.
package kernels

import (
	"fmt"

	"github.com/sluice-llm/sluice/quant"
)

// DType is a tensor element encoding.
type DType uint8

// The element encodings.
const (
	// F32 is IEEE float32.
	F32 DType = iota
	// Q8_0 is ggml's 8-bit block quantization: blocks of 32 values stored
	// as a float16 scale followed by 32 int8 (34 bytes).
	Q8_0
	// F16 is IEEE float16 (weights as stored, or a KV cache held at half
	// width; see KVAllocator).
	F16
	// BF16 is bfloat16: the top 16 bits of an IEEE float32.
	BF16
	// Q4_0 is ggml's 4-bit block quantization: blocks of 32 values stored as
	// a float16 scale and 16 bytes of nibbles (18 bytes).
	Q4_0
	// Q4_K is ggml's 4-bit k-quant: super-blocks of 256 values (144 bytes).
	Q4_K
	// Q5_K is ggml's 5-bit k-quant: super-blocks of 256 values (176 bytes).
	Q5_K
	// Q6_K is ggml's 6-bit k-quant: super-blocks of 256 values (210 bytes).
	Q6_K
)

// Q8Block is the number of values in one Q8_0 block, Q8BlockBytes its size.
const (
	Q8Block      = 32
	Q8BlockBytes = 34
)

// String returns the name of the encoding.
func (d DType) String() string {
	switch d {
	case F32:
		return "F32"
	case Q8_0:
		return "Q8_0"
	case F16:
		return "F16"
	case BF16:
		return "BF16"
	case Q4_0:
		return "Q4_0"
	case Q4_K:
		return "Q4_K"
	case Q5_K:
		return "Q5_K"
	case Q6_K:
		return "Q6_K"
	case MXFP4:
		return "MXFP4"
	}
	return fmt.Sprintf("DType(%d)", d)
}

// RowBytes is the byte size of one row of cols elements.
func (d DType) RowBytes(cols int) int {
	switch d {
	case Q8_0:
		return cols / Q8Block * Q8BlockBytes
	case F16, BF16:
		return 2 * cols
	case Q4_0:
		return cols / 32 * 18
	case Q4_K:
		return cols / quant.QKBlock * 144
	case Q5_K:
		return cols / quant.QKBlock * 176
	case Q6_K:
		return cols / quant.QKBlock * 210
	case MXFP4:
		return quant.MXFP4RowBytes(cols)
	}
	return 4 * cols
}

// Tensor is a 2-D array held by a Backend. Only the backend that made it may
// read or write it.
type Tensor interface {
	Rows() int
	Cols() int
	DType() DType
}

// RoPEStyle says which elements of a head form a rotary pair.
type RoPEStyle uint8

const (
	// RoPEInterleaved rotates pairs (2j, 2j+1): Meta's original Llama code,
	// llama2.c checkpoints and llama.cpp's GGUF llama weights.
	RoPEInterleaved RoPEStyle = iota
	// RoPEHalf rotates pairs (j, j+headDim/2): Hugging Face's rotate_half
	// (and llama.cpp's NEOX mode).
	RoPEHalf
)

// AttnBatch describes a varlen batch of sequences to the attention kernels.
// The rows of q (and of this step's k and v) are grouped by sequence:
// sequence s owns rows [QStart[s], QStart[s+1]). Its rows are its last
// QStart[s+1]-QStart[s] positions, ending at CtxLen[s]-1, and each row
// attends causally to every cached position up to its own.
type AttnBatch struct {
	// QStart has one entry per sequence plus one.
	QStart []int32
	// CtxLen is, per sequence, the number of positions in the KV cache once
	// this step's keys and values are written.
	CtxLen []int32
	// Tables holds the block tables of all sequences back to back; sequence
	// s's table is Tables[TableStart[s]:TableStart[s+1]].
	Tables     []int32
	TableStart []int32
	// BlockSize is the number of positions per KV block.
	BlockSize int
	// Slots is, per row, the cache slot (block*BlockSize + offset) that
	// receives the row's key and value.
	Slots []int32
	// KVHeadDim, when positive, lets a backend keep each block's KV heads
	// of KVHeadDim values apart in its cache tensors (the CPU backend:
	// [block][KV head][offset][KVHeadDim], so that one KV head's rows of
	// a block are contiguous); 0 keeps [slot][KV heads·head size]. Other
	// backends ignore it. A cache must be written (WriteKV) and read
	// (Attention) with the same value; it must be 0 or the AttnShape's
	// HeadDim.
	KVHeadDim int
}

// NumSeqs returns the number of sequences in the batch.
func (a *AttnBatch) NumSeqs() int { return len(a.QStart) - 1 }

// AttnShape gives the attention geometry.
type AttnShape struct {
	Heads, KVHeads, HeadDim int
	// Scale multiplies q·k, usually 1/sqrt(HeadDim).
	Scale float32
	// Window, when positive, limits each query to the last Window
	// positions up to its own (a sliding-window layer: keys at p with
	// pos-Window < p ≤ pos); 0 attends to every earlier position.
	Window int
	// Sinks, when not nil, holds one learned logit per query head that
	// joins the softmax and takes probability mass without adding a value
	// (gpt-oss's attention sinks). The slice is read during the op.
	Sinks []float32
}

// AttnFirst returns the first cache position a query at position pos
// attends to under s.Window.
func (s *AttnShape) AttnFirst(pos int) int {
	if s.Window > 0 {
		return max(pos-s.Window+1, 0)
	}
	return 0
}

// Backend runs tensor ops. Ops are issued in program order from one
// goroutine; a backend may run them asynchronously as long as ToHost sees
// the results of every earlier op. Host slices passed to ops (tokens,
// positions, block tables) are read before the op returns or copied.
type Backend interface {
	// Name identifies the backend ("ref", "cpu").
	Name() string
	// Weight makes a read-only tensor from encoded host bytes in any DType
	// (F32 little endian, F16, BF16, or ggml's Q8_0, Q4_0, Q4_K, Q5_K, Q6_K,
	// MXFP4 blocks, as a GGUF file stores them). The backend may keep referring
	// to data (for example a memory-mapped file) instead of copying it, so
	// data must stay valid and unchanged for the tensor's life; it never
	// writes into it.
	Weight(dt DType, rows, cols int, data []byte) (Tensor, error)
	// WeightF32 makes a read-only F32 tensor from host floats, which the
	// backend may keep referring to.
	WeightF32(rows, cols int, data []float32) (Tensor, error)
	// Alloc makes a zeroed F32 tensor.
	Alloc(rows, cols int) Tensor

	// MatMul sets out[:n] = x[:n] · wᵀ for w of shape [outDim × inDim].
	MatMul(out, x, w Tensor, n int)
	// AddRow adds the one-row tensor b to each of the first n rows of x.
	AddRow(x, b Tensor, n int)
	// Add sets out[:n] = a[:n] + b[:n] (out may alias a or b).
	Add(out, a, b Tensor, n int)
	// RMSNorm normalizes each w.Cols()-long chunk of the first n rows of x
	// and scales it by w: out = x / sqrt(mean(x²) + eps) * w. With w as wide
	// as a row this is the usual per-token norm; with w one head wide it is
	// the per-head q/k norm of Qwen3. out may alias x.
	RMSNorm(out, x, w Tensor, n int, eps float32)
	// RoPE rotates, in place, each headDim-long head of the first len(pos)
	// rows of x, row i being at position pos[i]. table holds, per position,
	// headDim/2 cosines followed by headDim/2 sines (see RoPETable).
	RoPE(x Tensor, pos []int32, table Tensor, headDim int, style RoPEStyle)
	// SiLUMul sets out[:n] = silu(gate[:n]) * up[:n] (out may alias gate).
	SiLUMul(out, gate, up Tensor, n int)
	// Embed sets out row i to row tokens[i] of table.
	Embed(out, table Tensor, tokens []int32)
	// Gather sets out row i to row rows[i] of x.
	Gather(out, x Tensor, rows []int32)
	// WriteKV stores row i of k and v into slot a.Slots[i] of the caches,
	// for the first len(a.Slots) rows.
	WriteKV(kCache, vCache, k, v Tensor, a *AttnBatch)
	// Attention computes causal attention of q's rows over the paged cache
	// (after WriteKV) and writes [rows × Heads*HeadDim] into out.
	Attention(out, q, kCache, vCache Tensor, a *AttnBatch, s AttnShape)
	// ToHost returns the first n rows of t as host floats. The slice may be
	// a view that later ops overwrite.
	ToHost(t Tensor, n int) []float32
	// Close releases the backend's workers and memory.
	Close()
}

// MatMulPreparer is implemented by backends that re-lay a weight once for
// faster MatMul (the CPU backend packs F32 weights into column panels).
// Model loaders call it for every weight they pass to MatMul. keepRows
// says the tensor has other uses (Embed of a tied embedding table), so
// that its row-major form must stay; otherwise the backend may drop it.
type MatMulPreparer interface {
	PrepareMatMul(w Tensor, keepRows bool) error
}

// PrepareMatMul calls be.PrepareMatMul(w, keepRows) when be implements
// MatMulPreparer and w is not nil.
func PrepareMatMul(be Backend, w Tensor, keepRows bool) error {
	p, ok := be.(MatMulPreparer)
	if !ok || w == nil {
		return nil
	}
	return p.PrepareMatMul(w, keepRows)
}

// KVAllocator is implemented by backends that can hold the KV cache in a
// type narrower than F32 (the CPU backend's F16 option). WriteKV and
// Attention accept what AllocKV returns; nothing else reads it.
type KVAllocator interface {
	// AllocKV makes a zeroed cache tensor of rows × cols elements.
	AllocKV(rows, cols int) Tensor
	// KVElemBytes is the size of one element of what AllocKV makes.
	KVElemBytes() int
}

// AllocKV makes a KV-cache tensor with be.AllocKV when be implements
// KVAllocator, else with be.Alloc (F32).
func AllocKV(be Backend, rows, cols int) Tensor {
	if a, ok := be.(KVAllocator); ok {
		return a.AllocKV(rows, cols)
	}
	return be.Alloc(rows, cols)
}

// KVElemBytes is the size of one KV-cache element on be (4 unless it
// implements KVAllocator).
func KVElemBytes(be Backend) int {
	if a, ok := be.(KVAllocator); ok {
		return a.KVElemBytes()
	}
	return 4
}
