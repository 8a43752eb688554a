package model

import (
	"github.com/sluice-llm/sluice/kernels"
)

// This file wires the mixture-of-experts families (gpt-oss, Qwen3-MoE) into
// the forward pass. Attention is the dense architectures' with gpt-oss's
// additions passed to the backend's Attention (AttnShape.Window on the
// sliding layers, AttnShape.Sinks); the feed-forward block of a sparse
// layer is moeFFN: the router's logits come to the host, each token picks
// its experts there, and each active expert then runs through the backend
// on just the rows routed to it: Gather → MatMul gate/up → activation →
// MatMul down → ScatterAdd into the residual stream, weighted by the
// router. A step reads each active expert's weights once, whatever the
// number of its tokens, and never an expert no token chose. Steps of up
// to moeFusedTokens tokens (decode) on backends with MatMulExperts run all
// active experts' projections as one op each (moeFFNFused: two parallel
// ops a layer instead of three per active expert); larger steps run the
// per-expert ops.
//
// KV cache: with NewKVCache every layer keeps K and V for every position
// (2 · layers · kvDim values per token; gpt-oss-20b: 2 · 24 · 512 = 24,576
// values, 48 KiB at F16). NewSplitKVCache (what the runner uses) gives the
// sliding layers their own block table (Batch.WinAttn), from which the
// scheduler gives back the blocks wholly before the window: a long
// sequence then costs the full layers' 24 KiB per token plus at most
// ceil(window/blockSize)+1 blocks of the sliding layers.

// ExpertWeights is one expert's matrices in their stored format (views
// into the file's 3-D tensor where the format stacks experts), and its
// biases (gpt-oss), nil where the family has none.
type ExpertWeights struct {
	Gate, Up kernels.Tensor // [expertHidden × dim]
	Down     kernels.Tensor // [dim × expertHidden]
	GateBias kernels.Tensor // [1 × expertHidden]
	UpBias   kernels.Tensor // [1 × expertHidden]
	DownBias kernels.Tensor // [1 × dim]
}

// moeScratch is the extra working memory of the expert blocks: host-side
// routing and one expert's group of rows on the backend.
type moeScratch struct {
	rlog       kernels.Tensor // [maxTokens × experts] router logits
	ex, ey     kernels.Tensor // [maxTokens × dim] an expert's rows in, out
	eg, eu     kernels.Tensor // [maxTokens × expertHidden]
	choice     []int32        // [maxTokens × topK] expert per (token, k)
	weight     []float32      // [maxTokens × topK]
	count      []int32        // [experts + 1]
	order      []int32        // [maxTokens × topK] (token, k) slots by expert
	rows       []int32        // [maxTokens × topK] the group's token rows
	rowWeights []float32      // [maxTokens × topK] the group's weights

	// fused is the one-op-per-projection path (moeFFNFused); nil where
	// the backend has no MatMulExperts or keeps tensors off the host
	fused *moeFused
}

// moeFusedTokens is the most tokens of a step that take moeFFNFused: every
// decode batch up to 16 sequences (64 routed slots for gpt-oss), whose
// per-expert ops would each be a short parallel op with its own dispatch
// and wait. Larger steps (prefill) run the per-expert ops, whose dispatch
// cost is small against their work, without a scratch of tokens · topK
// rows.
const moeFusedTokens = 16

// moeFused is the working memory of moeFFNFused: every routed slot's rows,
// grouped by expert, for slots = min(maxTokens, moeFusedTokens) · topK.
type moeFused struct {
	mm             kernels.ExpertMatMuler
	pair           kernels.ExpertPairMatMuler // nil if the backend runs gate and up apart
	x, g, u, y     *kernels.Host              // [slots × dim], [slots × hidden] ×2, [slots × dim]
	gv, uv, yv     kernels.Host               // one group's rows of g, u, y
	start          []int32                    // [experts + 1] group starts
	wg, wu, wd     []kernels.Tensor           // [experts] this step's weights per group
	tokens, hidden int

	// groups, when not nil (recordGroups), counts the expert groups of
	// every layer and step by their size: groups[g] is how many times an
	// expert got g rows (g ≥ 1) in one layer's step
	groups []int64
}

// newMoEScratch sizes the expert working memory for maxTokens rows; nil
// for dense models.
func (m *Model) newMoEScratch(maxTokens int) *moeScratch {
	a := m.Cfg.MoE
	if a == nil {
		return nil
	}
	be, c := m.be, &a.MoE
	slots := maxTokens * c.TopK
	return &moeScratch{
		rlog: be.Alloc(maxTokens, c.Experts),
		ex:   be.Alloc(maxTokens, c.Dim), ey: be.Alloc(maxTokens, c.Dim),
		eg: be.Alloc(maxTokens, c.Hidden), eu: be.Alloc(maxTokens, c.Hidden),
		choice: make([]int32, slots), weight: make([]float32, slots),
		count: make([]int32, c.Experts+1), order: make([]int32, slots),
		rows: make([]int32, slots), rowWeights: make([]float32, slots),
		fused: newMoEFused(be, c, min(maxTokens, moeFusedTokens)),
	}
}

// newMoEFused makes moeFFNFused's working memory for steps of up to tokens
// tokens, or returns nil if be has no MatMulExperts or keeps its tensors
// off the host (the per-group views need host rows).
func newMoEFused(be kernels.Backend, c *MoEConfig, tokens int) *moeFused {
	mm, ok := be.(kernels.ExpertMatMuler)
	if !ok || tokens <= 0 {
		return nil
	}
	slots := tokens * c.TopK
	x, ok := be.Alloc(slots, c.Dim).(*kernels.Host)
	if !ok {
		return nil
	}
	pair, _ := be.(kernels.ExpertPairMatMuler)
	return &moeFused{
		mm: mm, pair: pair, x: x,
		g: be.Alloc(slots, c.Hidden).(*kernels.Host), u: be.Alloc(slots, c.Hidden).(*kernels.Host),
		y:     be.Alloc(slots, c.Dim).(*kernels.Host),
		start: make([]int32, c.Experts+1),
		wg:    make([]kernels.Tensor, c.Experts), wu: make([]kernels.Tensor, c.Experts), wd: make([]kernels.Tensor, c.Experts),
		tokens: tokens, hidden: c.Hidden,
	}
}

// recordGroups makes the expert blocks' one-op path (moeFFNFused) count,
// from now on, the expert groups of each layer and step by their size, and
// returns the counts: element g (1 ≤ g ≤ moeFusedTokens·topK) is how many
// times an expert got g routed rows. It returns nil for dense models and
// backends without that path. For benchmarks and tests: the distribution
// of rows per expert decides which MXFP4 tiles a decode step runs and how
// many distinct experts it reads.
func (s *Scratch) recordGroups() []int64 {
	if s.moe == nil || s.moe.fused == nil {
		return nil
	}
	f := s.moe.fused
	if f.groups == nil {
		f.groups = make([]int64, f.x.R+1)
	}
	return f.groups
}

// attnShape is layer l's attention geometry: the model's, with the
// layer's window and sinks.
func (m *Model) attnShape(base kernels.AttnShape, l int) kernels.AttnShape {
	a := m.Cfg.MoE
	if a == nil {
		return base
	}
	if a.SlidingLayer[l] {
		base.Window = a.SlidingWindow
	}
	base.Sinks = m.Layers[l].Sinks
	return base
}

// moeFFN adds the expert block's output for the n normalised rows of
// s.xb to the residual stream s.x.
func (m *Model) moeFFN(s *Scratch, L *Layer, n int) {
	be, ms := m.be, s.moe
	ops := be.(kernels.ExpertOps) // checked at load
	c := &m.Cfg.MoE.MoE
	k := c.TopK

	// Route on the host: n × experts logits.
	be.MatMul(ms.rlog, s.xb, L.Router, n)
	if L.RouterBias != nil {
		be.AddRow(ms.rlog, L.RouterBias, n)
	}
	lg := be.ToHost(ms.rlog, n)
	for t := 0; t < n; t++ {
		c.route(lg[t*c.Experts:(t+1)*c.Experts], ms.choice[t*k:(t+1)*k], ms.weight[t*k:(t+1)*k])
	}

	// Group the (token, k) slots by expert.
	choice := ms.choice[:n*k]
	groupByExpert(choice, c.Experts, ms.count, ms.order)
	if f := ms.fused; f != nil && n <= f.tokens {
		m.moeFFNFused(s, L, n)
		return
	}

	start := int32(0)
	for e := 0; e < c.Experts; e++ {
		end := ms.count[e]
		group := ms.order[start:end]
		start = end
		g := len(group)
		if g == 0 {
			continue // never read an expert no token chose
		}
		rows, w := ms.rows[:g], ms.rowWeights[:g]
		for i, slot := range group {
			rows[i], w[i] = slot/int32(k), ms.weight[slot]
		}
		ex := &L.Experts[e]
		be.Gather(ms.ex, s.xb, rows)
		be.MatMul(ms.eg, ms.ex, ex.Gate, g)
		be.MatMul(ms.eu, ms.ex, ex.Up, g)
		if ex.GateBias != nil {
			be.AddRow(ms.eg, ex.GateBias, g)
		}
		if ex.UpBias != nil {
			be.AddRow(ms.eu, ex.UpBias, g)
		}
		if c.Act == ActClampedSwiGLU {
			ops.ClampedSwiGLU(ms.eg, ms.eg, ms.eu, g, c.Alpha, c.Limit)
		} else {
			be.SiLUMul(ms.eg, ms.eg, ms.eu, g)
		}
		be.MatMul(ms.ey, ms.eg, ex.Down, g)
		if ex.DownBias != nil {
			be.AddRow(ms.ey, ex.DownBias, g)
		}
		ops.ScatterAdd(s.x, ms.ey, rows, w)
	}
}

// moeFFNFused is moeFFN after routing for a step of at most
// moeFused.tokens tokens: one Gather of every routed slot's row (grouped
// by expert), one op for gate and up together (MatMulExpertPair where the
// backend has it, else one MatMulExperts each) and one MatMulExperts for
// down, over all active experts (each expert's weight read once, the
// experts' rows spread over the workers in one parallel op: two dispatches
// a layer instead of three per active expert), the biases and the activation on each group's
// rows, and one ScatterAdd. Each expert's rows get the same ops as in the
// per-expert loop, and the ScatterAdd adds the slots in the same order.
func (m *Model) moeFFNFused(s *Scratch, L *Layer, n int) {
	be, ms := m.be, s.moe
	ops := be.(kernels.ExpertOps) // checked at load
	f := ms.fused
	c := &m.Cfg.MoE.MoE
	k := c.TopK
	slots := n * k
	rows, w := ms.rows[:slots], ms.rowWeights[:slots]
	for i, slot := range ms.order[:slots] {
		rows[i], w[i] = slot/int32(k), ms.weight[slot]
	}
	f.start[0] = 0
	for e := 0; e < c.Experts; e++ {
		f.start[e+1] = ms.count[e]
		f.wg[e], f.wu[e], f.wd[e] = nil, nil, nil
		if g := ms.count[e] - f.start[e]; g > 0 {
			ex := &L.Experts[e]
			f.wg[e], f.wu[e], f.wd[e] = ex.Gate, ex.Up, ex.Down
			if f.groups != nil {
				f.groups[g]++
			}
		}
	}
	be.Gather(f.x, s.xb, rows)
	if f.pair != nil {
		f.pair.MatMulExpertPair(f.g, f.u, f.x, f.wg, f.wu, f.start)
	} else {
		f.mm.MatMulExperts(f.g, f.x, f.wg, f.start)
		f.mm.MatMulExperts(f.u, f.x, f.wu, f.start)
	}
	for e := 0; e < c.Experts; e++ {
		lo, hi := int(f.start[e]), int(f.start[e+1])
		if hi == lo {
			continue
		}
		g, ex := hi-lo, &L.Experts[e]
		f.gv = kernels.Host{R: g, C: f.hidden, DT: kernels.F32, F: f.g.F[lo*f.hidden : hi*f.hidden]}
		f.uv = kernels.Host{R: g, C: f.hidden, DT: kernels.F32, F: f.u.F[lo*f.hidden : hi*f.hidden]}
		if ex.GateBias != nil {
			be.AddRow(&f.gv, ex.GateBias, g)
		}
		if ex.UpBias != nil {
			be.AddRow(&f.uv, ex.UpBias, g)
		}
		if c.Act == ActClampedSwiGLU {
			ops.ClampedSwiGLU(&f.gv, &f.gv, &f.uv, g, c.Alpha, c.Limit)
		} else {
			be.SiLUMul(&f.gv, &f.gv, &f.uv, g)
		}
	}
	f.mm.MatMulExperts(f.y, f.g, f.wd, f.start)
	for e := 0; e < c.Experts; e++ {
		lo, hi := int(f.start[e]), int(f.start[e+1])
		if ex := &L.Experts[e]; hi > lo && ex.DownBias != nil {
			f.yv = kernels.Host{R: hi - lo, C: f.y.C, DT: kernels.F32, F: f.y.F[lo*f.y.C : hi*f.y.C]}
			be.AddRow(&f.yv, ex.DownBias, hi-lo)
		}
	}
	ops.ScatterAdd(s.x, f.y, rows, w)
}
