package model

import (
	"fmt"

	"github.com/sluice-llm/sluice/kernels"
)

// Backend execution of the MoE block. Once Bind has made backend tensors of
// the expert weights (in their stored encodings, over the same bytes: no
// copy), Forward runs the three expert projections as the backend's
// MatMulExperts: the (token, expert) slots are gathered into groups by
// expert, each projection is one parallel op that reads every active
// expert's weight once, and the activation and the weighted sum into each
// token's output run on the rows in host memory. The backend must keep its
// tensors in host memory (kernels.Host: the CPU and reference backends).

// moeExec is a MoE block's binding to a backend.
type moeExec struct {
	be             kernels.Backend
	mm             kernels.ExpertMatMuler
	gate, up, down []kernels.Tensor // per expert; nil for an expert with no weights
	router         kernels.Tensor
}

// moeExecScratch is the backend working memory of one scratch: host
// tensors of MaxTokens·TopK rows, and the per-call expert lists.
type moeExecScratch struct {
	xg, gate, up, y *kernels.Host
	x, logits       kernels.Host     // views of Forward's input and s.logits
	start           []int32          // [Experts+1] group starts
	wg, wu, wd      []kernels.Tensor // [Experts] this step's weights per group
}

// Bind makes backend tensors of every expert's weights (F32 through
// WeightF32, block formats through Weight, over the same memory) so that
// Forward runs the experts on be, which must implement
// kernels.ExpertMatMuler and keep tensors in host memory. Expert weights may
// then be in any block format the backend multiplies (Q4_K, Q6_K, … as
// well as Q8_0 and MXFP4). Scratches made before Bind must be made again.
func (m *MoE) Bind(be kernels.Backend) error {
	mm, ok := be.(kernels.ExpertMatMuler)
	if !ok {
		return fmt.Errorf("moe: backend %s has no MatMulExperts", be.Name())
	}
	if _, ok := be.Alloc(1, 1).(*kernels.Host); !ok {
		return fmt.Errorf("moe: backend %s does not keep tensors in host memory", be.Name())
	}
	if err := m.validate(true); err != nil {
		return err
	}
	c := &m.Cfg
	ex := &moeExec{be: be, mm: mm, gate: make([]kernels.Tensor, c.Experts), up: make([]kernels.Tensor, c.Experts), down: make([]kernels.Tensor, c.Experts)}
	for e := range m.Experts {
		x := &m.Experts[e]
		for _, p := range []struct {
			m   *Matrix
			dst *kernels.Tensor
		}{{&x.Gate, &ex.gate[e]}, {&x.Up, &ex.up[e]}, {&x.Down, &ex.down[e]}} {
			if x.empty() {
				continue // Forward fails if a token chooses it
			}
			t, err := p.m.tensor(be)
			if err != nil {
				return fmt.Errorf("moe: expert %d: %w", e, err)
			}
			*p.dst = t
		}
	}
	rt, err := m.Router.tensor(be)
	if err != nil {
		return fmt.Errorf("moe: router: %w", err)
	}
	if err := kernels.PrepareMatMul(be, rt, false); err != nil {
		return fmt.Errorf("moe: router: %w", err)
	}
	ex.router = rt
	m.exec = ex
	return nil
}

// routerLogits sets s.logits[:n×Experts] to the router's logits (bias not
// added) for the n tokens of x with the backend's MatMul.
func (m *MoE) routerLogits(s *MoEScratch, x []float32, n int) {
	c, xs := &m.Cfg, s.exec
	xs.x = kernels.Host{R: n, C: c.Dim, DT: kernels.F32, F: x[:n*c.Dim]}
	xs.logits = kernels.Host{R: n, C: c.Experts, DT: kernels.F32, F: s.logits[:n*c.Experts]}
	m.exec.be.MatMul(&xs.logits, &xs.x, m.exec.router, n)
}

// tensor makes the backend tensor of m over its memory.
func (m *Matrix) tensor(be kernels.Backend) (kernels.Tensor, error) {
	if m.DT == kernels.F32 {
		return be.WeightF32(m.Rows, m.Cols, m.F)
	}
	return be.Weight(m.DT, m.Rows, m.Cols, m.Q)
}

// newExecScratch makes the backend working memory for maxTokens tokens.
func (m *MoE) newExecScratch(maxTokens int) *moeExecScratch {
	c, be := &m.Cfg, m.exec.be
	slots := maxTokens * c.TopK
	return &moeExecScratch{
		xg:    be.Alloc(slots, c.Dim).(*kernels.Host),
		gate:  be.Alloc(slots, c.Hidden).(*kernels.Host),
		up:    be.Alloc(slots, c.Hidden).(*kernels.Host),
		y:     be.Alloc(slots, c.Dim).(*kernels.Host),
		start: make([]int32, c.Experts+1),
		wg:    make([]kernels.Tensor, c.Experts),
		wu:    make([]kernels.Tensor, c.Experts),
		wd:    make([]kernels.Tensor, c.Experts),
	}
}

// forwardExec is Forward on the bound backend, after routing: s.order
// holds the slots grouped by expert and s.count[e] the end of expert e's
// group.
func (m *MoE) forwardExec(s *MoEScratch, out, x []float32, n int, weight []float32) error {
	c, ex, xs := &m.Cfg, m.exec, s.exec
	if xs == nil || xs.xg.R < n*c.TopK {
		return fmt.Errorf("moe: scratch made before Bind or too small for %d tokens", n)
	}
	k := c.TopK
	slots := n * k
	active := 0
	xs.start[0] = 0
	for e := 0; e < c.Experts; e++ {
		xs.start[e+1] = s.count[e]
		xs.wg[e], xs.wu[e], xs.wd[e] = nil, nil, nil
		if s.count[e] > xs.start[e] {
			if ex.gate[e] == nil || ex.up[e] == nil || ex.down[e] == nil {
				return fmt.Errorf("moe: expert %d was chosen but has no weights", e)
			}
			xs.wg[e], xs.wu[e], xs.wd[e] = ex.gate[e], ex.up[e], ex.down[e]
			active++
		}
	}
	// Gather each slot's token row into its group.
	for i, slot := range s.order[:slots] {
		tok := int(slot) / k
		copy(xs.xg.F[i*c.Dim:(i+1)*c.Dim], x[tok*c.Dim:(tok+1)*c.Dim])
	}
	ex.mm.MatMulExperts(xs.gate, xs.xg, xs.wg, xs.start)
	ex.mm.MatMulExperts(xs.up, xs.xg, xs.wu, xs.start)
	e := 0
	for i := range s.order[:slots] {
		for int32(i) >= xs.start[e+1] {
			e++
		}
		m.activate(&m.Experts[e], xs.gate.F[i*c.Hidden:(i+1)*c.Hidden], xs.up.F[i*c.Hidden:(i+1)*c.Hidden])
	}
	ex.mm.MatMulExperts(xs.y, xs.gate, xs.wd, xs.start)
	s.RowsRead += int64(active * (2*c.Hidden + c.Dim))
	// Weighted sum into each token's output.
	clear(out[:n*c.Dim])
	e = 0
	for i, slot := range s.order[:slots] {
		for int32(i) >= xs.start[e+1] {
			e++
		}
		db := m.Experts[e].DownBias
		w := weight[slot]
		tok := int(slot) / k
		ot := out[tok*c.Dim : (tok+1)*c.Dim]
		for j, v := range xs.y.F[i*c.Dim : (i+1)*c.Dim] {
			if db != nil {
				v += db[j]
			}
			ot[j] += w * v
		}
	}
	return nil
}
