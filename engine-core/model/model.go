package model

import (
	"fmt"
	"math"

	"github.com/sluice-llm/sluice/kernels"
)

// Layer holds one transformer block's weights. Optional tensors are nil
// when the architecture has none.
type Layer struct {
	AttnNorm       kernels.Tensor // [1 × dim]
	Wq, Wk, Wv, Wo kernels.Tensor // [qdim × dim], [kvdim × dim] ×2, [dim × qdim]
	Bq, Bk, Bv, Bo kernels.Tensor // biases (Qwen2; Llama attention_bias)
	QNorm, KNorm   kernels.Tensor // [1 × headDim] (Qwen3)
	FFNNorm        kernels.Tensor // [1 × dim]
	Gate, Up, Down kernels.Tensor // [hidden × dim] ×2, [dim × hidden]

	// Mixture-of-experts layers (moe_model.go): the router [experts × dim]
	// and its bias (gpt-oss) replace Gate/Up/Down.
	Router, RouterBias kernels.Tensor
	Experts            []ExpertWeights
	// Sinks is one learned attention logit per query head (gpt-oss).
	Sinks []float32
}

// Model is a loaded model: its config and its weights on a backend.
type Model struct {
	Cfg    Config
	Embed  kernels.Tensor // [vocab × dim]
	Norm   kernels.Tensor // [1 × dim]
	LMHead kernels.Tensor // [vocab × dim]; Embed when tied
	Layers []Layer

	be   kernels.Backend
	rope kernels.Tensor // [maxPos × headDim]: cos | sin
	src  source
	// weightBytes is the size of the weights as the file stores them.
	weightBytes int64
	// repacked are file bytes that the loader copied into another layout
	// (gpt-oss's safetensors experts), released once repacked and again
	// at the end of build, after every other read of the file (a read
	// faults in the pages around it)
	repacked [][]byte
	// copiedBytes is the file bytes of the weights held in memory of the
	// process's own (CopiedWeightBytes)
	copiedBytes int64
}

// WeightBytes is the size of the model's weights as its file stores them
// (every tensor loaded, tied ones once).
func (m *Model) WeightBytes() int64 { return m.weightBytes }

// CopiedWeightBytes is the part of the weights (in file bytes) that the
// loader or the backend copied into memory of its own (gpt-oss's
// safetensors experts, decoded or repacked matrices, weights in the CPU
// backend's huge-page arena): resident from the load on, so MemAvailable
// no longer counts them, unlike the memory-mapped rest, whose pages are
// read in as they are first used.
func (m *Model) CopiedWeightBytes() int64 { return m.copiedBytes }

// Backend returns the backend the weights live on.
func (m *Model) Backend() kernels.Backend { return m.be }

// Close releases the weight file mappings. The backend is the caller's.
func (m *Model) Close() error {
	if m.src == nil {
		return nil
	}
	err := m.src.close()
	m.src = nil
	return err
}

// KVCache is the paged key/value cache: per layer, one K and one V tensor of
// [numBlocks*blockSize × kvDim] rows; slot s = block*blockSize + offset.
//
// A split cache (NewSplitKVCache, Window > 0) has two groups of layers, the
// full-attention layers and the sliding-window layers, each with its own
// block table per sequence, drawing block ids from one pool: the j-th full
// layer and the j-th window layer share one K and one V tensor (K[l] is
// the same tensor for both), and a block id belongs to one group at a
// time. The window layers write and read through Batch.WinAttn.
type KVCache struct {
	K, V      []kernels.Tensor
	NumBlocks int
	BlockSize int
	// Window is the sliding window of the layers that use Batch.WinAttn;
	// 0 when one block table serves every layer.
	Window int
}

// KVWindow is the window of the model's sliding-window layers when they
// can keep their own KV group (some layers slide and some attend to
// everything: gpt-oss), else 0.
func (m *Model) KVWindow() int {
	a := m.Cfg.MoE
	if a == nil || a.SlidingWindow <= 0 {
		return 0
	}
	n := m.slidingLayers()
	if n == 0 || n == len(a.SlidingLayer) {
		return 0
	}
	return a.SlidingWindow
}

// slidingLayers counts the sliding-window layers.
func (m *Model) slidingLayers() int {
	n := 0
	if a := m.Cfg.MoE; a != nil {
		for _, s := range a.SlidingLayer {
			if s {
				n++
			}
		}
	}
	return n
}

// splitSlots is the number of K/V tensor pairs of a split cache: the larger
// group's layer count.
func (m *Model) splitSlots() int {
	w := m.slidingLayers()
	return max(w, m.Cfg.Layers-w)
}

// windowLayer reports whether layer l reads a split cache through the
// window group's tables.
func (m *Model) windowLayer(kv *KVCache, l int) bool {
	return kv.Window > 0 && m.Cfg.MoE.SlidingLayer[l]
}

// NewSplitKVCache allocates a split cache (see KVCache) of numBlocks blocks
// of blockSize positions, each block holding one group's layers; a model
// without a window group (KVWindow() == 0) gets NewKVCache's.
func (m *Model) NewSplitKVCache(numBlocks, blockSize int) *KVCache {
	w := m.KVWindow()
	if w == 0 {
		return m.NewKVCache(numBlocks, blockSize)
	}
	kv := &KVCache{NumBlocks: numBlocks, BlockSize: blockSize, Window: w}
	var ks, vs []kernels.Tensor
	for range m.splitSlots() {
		ks = append(ks, kernels.AllocKV(m.be, numBlocks*blockSize, m.Cfg.KVDim()))
		vs = append(vs, kernels.AllocKV(m.be, numBlocks*blockSize, m.Cfg.KVDim()))
	}
	var next [2]int // next slot of the full and the window group
	for l := range m.Cfg.Layers {
		g := 0
		if m.Cfg.MoE.SlidingLayer[l] {
			g = 1
		}
		kv.K, kv.V = append(kv.K, ks[next[g]]), append(kv.V, vs[next[g]])
		next[g]++
	}
	return kv
}

// SplitKVBytesPerBlock is the memory of one block of NewSplitKVCache's
// cache: one group's layers (the larger group's count); KVBytesPerBlock's
// for a model without a window group.
func (m *Model) SplitKVBytesPerBlock(blockSize int) int64 {
	if m.KVWindow() == 0 {
		return m.KVBytesPerBlock(blockSize)
	}
	return m.KVBytesPerBlock(blockSize) / int64(m.Cfg.Layers) * int64(m.splitSlots())
}

// NewKVCache allocates a cache of numBlocks blocks of blockSize positions.
func (m *Model) NewKVCache(numBlocks, blockSize int) *KVCache {
	kv := &KVCache{NumBlocks: numBlocks, BlockSize: blockSize}
	for range m.Cfg.Layers {
		kv.K = append(kv.K, kernels.AllocKV(m.be, numBlocks*blockSize, m.Cfg.KVDim()))
		kv.V = append(kv.V, kernels.AllocKV(m.be, numBlocks*blockSize, m.Cfg.KVDim()))
	}
	return kv
}

// KVBytesPerBlock is the cache memory one block takes on the model's
// backend (K and V over all layers, at the backend's KV element size).
func (m *Model) KVBytesPerBlock(blockSize int) int64 {
	return m.Cfg.KVBytesPerBlock(blockSize) / 4 * int64(kernels.KVElemBytes(m.be))
}

// KVBytesPerBlock is the cache memory one block takes (F32 K and V over all
// layers).
func (c *Config) KVBytesPerBlock(blockSize int) int64 {
	return 2 * int64(c.Layers) * int64(blockSize) * int64(c.KVDim()) * 4
}

// Batch is one varlen forward pass: the tokens of several sequences back
// to back, each at its position, with the paged-attention description.
type Batch struct {
	Tokens []int32
	Pos    []int32
	Attn   kernels.AttnBatch
	// WinAttn is the sliding-window layers' view of a split cache
	// (KVCache.Window > 0): QStart, CtxLen and BlockSize as in Attn, the
	// window group's tables (entries for blocks wholly before a sequence's
	// window may be kvcache.NoBlock: never read) and slots. Unused with a
	// cache of one group.
	WinAttn kernels.AttnBatch
	// OutRows lists the rows (indexes into Tokens) whose logits are wanted.
	OutRows []int32
}

// Forward runs the batch through the model, writing this step's keys and
// values into kv, and returns the logits of b.OutRows as host floats
// [len(OutRows) × vocab]. The slice is reused by the next call.
func (m *Model) Forward(s *Scratch, kv *KVCache, b *Batch) ([]float32, error) {
	logits, err := m.ForwardTensor(s, kv, b)
	if err != nil {
		return nil, err
	}
	return m.be.ToHost(logits, len(b.OutRows)), nil
}

// ForwardTensor is Forward leaving the logits on the backend: row i of the
// returned [s.MaxOut × vocab] tensor holds the logits of b.OutRows[i], for
// i < len(b.OutRows). Nothing is copied to the host, so a backend that
// samples where the logits live (kernels.DeviceSampler) can pick tokens
// from it directly. The tensor is the scratch's and the next call
// overwrites it.
func (m *Model) ForwardTensor(s *Scratch, kv *KVCache, b *Batch) (kernels.Tensor, error) {
	c, be := &m.Cfg, m.be
	n := len(b.Tokens)
	if n > s.MaxTokens || len(b.OutRows) > s.MaxOut {
		return nil, fmt.Errorf("model: batch of %d tokens / %d outputs exceeds scratch %d / %d", n, len(b.OutRows), s.MaxTokens, s.MaxOut)
	}
	for _, p := range b.Pos {
		if int(p) >= c.MaxPos || p < 0 {
			return nil, fmt.Errorf("model: position %d outside [0, %d)", p, c.MaxPos)
		}
	}
	for _, t := range b.Tokens {
		if t < 0 || int(t) >= c.Vocab {
			return nil, fmt.Errorf("model: token %d outside vocabulary of %d", t, c.Vocab)
		}
	}
	if kv.Window > 0 && (len(b.WinAttn.QStart) != len(b.Attn.QStart) || len(b.WinAttn.Slots) != n) {
		return nil, fmt.Errorf("model: split KV cache needs the window layers' tables (Batch.WinAttn: %d sequences, %d slots for %d sequences, %d tokens)",
			b.WinAttn.NumSeqs(), len(b.WinAttn.Slots), b.Attn.NumSeqs(), n)
	}
	if n > s.rows && !s.sub {
		return nil, fmt.Errorf("model: batch of %d tokens exceeds the scratch's %d rows on a backend without row views", n, s.rows)
	}
	k := len(b.OutRows)
	if n <= s.rows {
		m.forwardRows(s, kv, b.Tokens, b.Pos, &b.Attn, &b.WinAttn)
		be.Gather(s.last, s.x, b.OutRows)
	} else {
		for lo := 0; lo < n; lo += s.rows {
			hi := min(lo+s.rows, n)
			s.sb.slice(b, kv.Window > 0, lo, hi)
			m.forwardRows(s, kv, b.Tokens[lo:hi], b.Pos[lo:hi], &s.sb.attn, &s.sb.win)
			s.gatherOut(be, b.OutRows, lo, hi)
		}
	}

	// final norm and classifier, only for the rows that need logits
	be.RMSNorm(s.last, s.last, m.Norm, k, c.NormEps)
	be.MatMul(s.logits, s.last, m.LMHead, k)
	return s.logits, nil
}

// forwardRows runs len(tokens) rows (at most s.rows) through the embedding
// and every layer, writing their keys and values into kv: the final
// hidden states are rows [0, len(tokens)) of s.x. attn (and win, for a
// split cache) describe exactly these rows.
func (m *Model) forwardRows(s *Scratch, kv *KVCache, tokens, pos []int32, attn0, win *kernels.AttnBatch) {
	c, be := &m.Cfg, m.be
	n := len(tokens)
	shape := kernels.AttnShape{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Scale: float32(1 / math.Sqrt(float64(c.HeadDim)))}

	// q/k/v and gate/up as one op each where the backend can
	sh, _ := be.(kernels.SharedMatMuler)

	// a residual addition and the norm after it as one op where the
	// backend can; normed: s.xb already holds this layer's attention norm
	an, _ := be.(kernels.AddNormer)
	normed := false

	// token embeddings
	be.Embed(s.x, m.Embed, tokens)
	for l := range m.Layers {
		L := &m.Layers[l]

		// attention: norm, q/k/v projections (+ bias), q/k norm, RoPE
		if !normed {
			be.RMSNorm(s.xb, s.x, L.AttnNorm, n, c.NormEps)
		}
		normed = false
		if sh != nil {
			s.mmOut, s.mmW = [3]kernels.Tensor{s.q, s.k, s.v}, [3]kernels.Tensor{L.Wq, L.Wk, L.Wv}
			sh.MatMulShared(s.mmOut[:], s.xb, s.mmW[:], n)
		} else {
			be.MatMul(s.q, s.xb, L.Wq, n)
			be.MatMul(s.k, s.xb, L.Wk, n)
			be.MatMul(s.v, s.xb, L.Wv, n)
		}
		if L.Bq != nil {
			be.AddRow(s.q, L.Bq, n)
			be.AddRow(s.k, L.Bk, n)
			be.AddRow(s.v, L.Bv, n)
		}
		if L.QNorm != nil {
			be.RMSNorm(s.q, s.q, L.QNorm, n, c.NormEps)
			be.RMSNorm(s.k, s.k, L.KNorm, n, c.NormEps)
		}
		be.RoPE(s.q, pos, m.rope, c.HeadDim, c.RopeStyle)
		be.RoPE(s.k, pos, m.rope, c.HeadDim, c.RopeStyle)

		// store this step's keys and values, attend over the paged cache
		attn := attn0
		if m.windowLayer(kv, l) {
			attn = win
		}
		// every write and read of the cache takes the head size as its
		// layout (kernels.AttnBatch.KVHeadDim)
		attn.KVHeadDim = c.HeadDim
		be.WriteKV(kv.K[l], kv.V[l], s.k, s.v, attn)
		be.Attention(s.att, s.q, kv.K[l], kv.V[l], attn, m.attnShape(shape, l))

		// output projection and residual
		be.MatMul(s.xb, s.att, L.Wo, n)
		if L.Bo != nil {
			be.AddRow(s.xb, L.Bo, n)
		}
		// SwiGLU feed-forward (or the expert block) and residual
		if an != nil {
			an.AddRMSNorm(s.xb, s.x, s.xb, L.FFNNorm, n, c.NormEps)
		} else {
			be.Add(s.x, s.x, s.xb, n)
			be.RMSNorm(s.xb, s.x, L.FFNNorm, n, c.NormEps)
		}
		if L.Router != nil {
			m.moeFFN(s, L, n)
			continue
		}
		if sh != nil {
			s.mmOut, s.mmW = [3]kernels.Tensor{s.gate, s.up}, [3]kernels.Tensor{L.Gate, L.Up}
			sh.MatMulShared(s.mmOut[:2], s.xb, s.mmW[:2], n)
		} else {
			be.MatMul(s.gate, s.xb, L.Gate, n)
			be.MatMul(s.up, s.xb, L.Up, n)
		}
		be.SiLUMul(s.gate, s.gate, s.up, n)
		be.MatMul(s.xb, s.gate, L.Down, n)
		if an != nil && l+1 < len(m.Layers) {
			// the residual and the next layer's attention norm
			an.AddRMSNorm(s.xb, s.x, s.xb, m.Layers[l+1].AttnNorm, n, c.NormEps)
			normed = true
			continue
		}
		be.Add(s.x, s.x, s.xb, n)
	}

}
