package model

import (
	"github.com/sluice-llm/sluice/kernels"
)

// This file wires the mixture-of-experts families (gpt-oss, Qwen3-MoE) into
// the forward pass. Attention is the dense architectures' with gpt-oss's
// additions passed to the backend's Attention (AttnShape.Window on the
// sliding layers, AttnShape.Sinks); the feed-forward block of a sparse
// layer is moeFFN: the router's logits come to the host, each token picks
// its experts there, and the routed rows, grouped by expert, run through
// the backend: Gather → MatMulExperts gate/up (+ biases gathered per row)
// → activation → MatMulExperts down → ScatterAdd into the residual stream,
// weighted by the router. A backend without kernels.ExpertMatMuler gets
// the same per expert with MatMul on just that expert's rows. A step reads
// each active expert's weights once, whatever the number of its tokens,
// and never an expert no token chose.
//
// KV cache: every layer keeps K and V for every position, sliding layers
// included (2 · layers · kvDim values per token; gpt-oss-20b: 2 · 24 · 512
// = 24,576 values, 48 KiB at F16). A sliding layer's attention reads only
// its last SlidingWindow positions; freeing the blocks that fall out of
// its window is not implemented.

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
// routing and the routed rows on the backend (up to maxTokens × topK of
// them, grouped by expert).
type moeScratch struct {
	rlog       kernels.Tensor // [maxTokens × experts] router logits
	ex, ey     kernels.Tensor // [slots × dim] routed rows in, out
	eg, eu     kernels.Tensor // [slots × expertHidden]
	ebH, ebD   kernels.Tensor // [slots × expertHidden], [slots × dim] gathered biases (gpt-oss)
	choice     []int32        // [maxTokens × topK] expert per (token, k)
	weight     []float32      // [maxTokens × topK]
	count      []int32        // [experts + 1]
	start      []int32        // [experts + 1] group starts for MatMulExperts
	order      []int32        // [slots] (token, k) slots by expert
	rows       []int32        // [slots] the token row of each routed row
	rowWeights []float32      // [slots] its router weight
	rowExpert  []int32        // [slots] its expert
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
	ms := &moeScratch{
		rlog: be.Alloc(maxTokens, c.Experts),
		ex:   be.Alloc(slots, c.Dim), ey: be.Alloc(slots, c.Dim),
		eg: be.Alloc(slots, c.Hidden), eu: be.Alloc(slots, c.Hidden),
		choice: make([]int32, slots), weight: make([]float32, slots),
		count: make([]int32, c.Experts+1), start: make([]int32, c.Experts+1), order: make([]int32, slots),
		rows: make([]int32, slots), rowWeights: make([]float32, slots), rowExpert: make([]int32, slots),
	}
	for l := range m.Layers {
		if m.Layers[l].expGateBias != nil || m.Layers[l].expDownBias != nil {
			ms.ebH, ms.ebD = be.Alloc(slots, c.Hidden), be.Alloc(slots, c.Dim)
			break
		}
	}
	return ms
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

	// Group the (token, k) slots by expert: a counting sort.
	choice := ms.choice[:n*k]
	clear(ms.count)
	for _, e := range choice {
		ms.count[e+1]++
	}
	for e := 1; e <= c.Experts; e++ {
		ms.count[e] += ms.count[e-1]
	}
	copy(ms.start, ms.count) // start[e] is expert e's first routed row
	for slot, e := range choice {
		ms.order[ms.count[e]] = int32(slot)
		ms.count[e]++
	}
	for i, slot := range ms.order[:n*k] {
		ms.rows[i], ms.rowWeights[i], ms.rowExpert[i] = slot/int32(k), ms.weight[slot], choice[slot]
	}

	if mm, ok := be.(kernels.ExpertMatMuler); ok {
		// every routed row at once: the backend reads each active expert
		// once and spreads the experts over its threads
		r := n * k
		rows := ms.rows[:r]
		be.Gather(ms.ex, s.xb, rows)
		mm.MatMulExperts(ms.eg, ms.ex, L.expGate, ms.start)
		mm.MatMulExperts(ms.eu, ms.ex, L.expUp, ms.start)
		if L.expGateBias != nil {
			be.Gather(ms.ebH, L.expGateBias, ms.rowExpert[:r])
			be.Add(ms.eg, ms.eg, ms.ebH, r)
		}
		if L.expUpBias != nil {
			be.Gather(ms.ebH, L.expUpBias, ms.rowExpert[:r])
			be.Add(ms.eu, ms.eu, ms.ebH, r)
		}
		m.expertAct(ops, c, ms.eg, ms.eu, r)
		mm.MatMulExperts(ms.ey, ms.eg, L.expDown, ms.start)
		if L.expDownBias != nil {
			be.Gather(ms.ebD, L.expDownBias, ms.rowExpert[:r])
			be.Add(ms.ey, ms.ey, ms.ebD, r)
		}
		ops.ScatterAdd(s.x, ms.ey, rows, ms.rowWeights[:r])
		return
	}

	// one expert at a time, on just its rows
	for e := 0; e < c.Experts; e++ {
		lo, hi := ms.start[e], ms.start[e+1]
		g := int(hi - lo)
		if g == 0 {
			continue // never read an expert no token chose
		}
		rows, w := ms.rows[lo:hi], ms.rowWeights[lo:hi]
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
		m.expertAct(ops, c, ms.eg, ms.eu, g)
		be.MatMul(ms.ey, ms.eg, ex.Down, g)
		if ex.DownBias != nil {
			be.AddRow(ms.ey, ex.DownBias, g)
		}
		ops.ScatterAdd(s.x, ms.ey, rows, w)
	}
}

// expertAct applies the family's gated activation to the first n rows,
// writing over gate.
func (m *Model) expertAct(ops kernels.ExpertOps, c *MoEConfig, gate, up kernels.Tensor, n int) {
	if c.Act == ActClampedSwiGLU {
		ops.ClampedSwiGLU(gate, gate, up, n, c.Alpha, c.Limit)
		return
	}
	m.be.SiLUMul(gate, gate, up, n)
}
