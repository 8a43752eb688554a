package model

import (
	"fmt"
	"math"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// This file is the mixture-of-experts feed-forward block, written as a plain
// host reference (float32 slices, one goroutine) that fast backends and the
// model loaders build on; once bound to a backend (MoE.Bind, moe_exec.go)
// the expert projections run there as MatMulExperts. Per token:
//
//	logits  = router · x (+ router bias)
//	choose top-k experts and their weights (Routing)
//	out     = Σ_k weight_k · down_k(act(gate_k · x, up_k · x))
//
// The batch is grouped by expert: the tokens routed to one expert are
// gathered, and each row of that expert's matrices is read once and applied
// to all of them, so a step reads every active expert's weights once however
// many tokens chose it, and never reads an expert no token chose.

// Routing is how router logits become expert choices and weights.
type Routing uint8

const (
	// RouteSoftmaxTopK takes the softmax over all experts, then the top k
	// probabilities; with MoEConfig.NormTopK they are renormalised to sum
	// to 1 (Qwen3-MoE, Mixtral; Qwen3-MoE's norm_topk_prob).
	RouteSoftmaxTopK Routing = iota
	// RouteTopKSoftmax takes the top k logits, then the softmax over just
	// those (gpt-oss).
	RouteTopKSoftmax
)

// Activation is the gated activation of an expert's hidden layer.
type Activation uint8

const (
	// ActSwiGLU is silu(gate) · up (Qwen3-MoE, Mixtral).
	ActSwiGLU Activation = iota
	// ActClampedSwiGLU is gpt-oss's: gate clamped above at Limit, up
	// clamped to [-Limit, Limit], then gate · sigmoid(Alpha · gate) · (up + 1).
	ActClampedSwiGLU
)

// MoEConfig describes one mixture-of-experts block.
type MoEConfig struct {
	// Dim is the model width; Hidden each expert's intermediate width.
	Dim, Hidden int
	// Experts is the number of experts, TopK how many each token uses.
	Experts, TopK int
	Routing       Routing
	// NormTopK renormalises the chosen probabilities (RouteSoftmaxTopK).
	NormTopK bool
	Act      Activation
	// Alpha and Limit are ActClampedSwiGLU's constants (gpt-oss: 1.702, 7).
	Alpha, Limit float32
}

// GptOssSwiGLU returns gpt-oss's activation constants (swiglu_limit 7.0 in
// its config.json; alpha 1.702 in the reference implementation).
func GptOssSwiGLU() (alpha, limit float32) { return 1.702, 7.0 }

// maxExperts bounds the expert count a config may declare (the released
// families have 32 and 128; llama.cpp allows 512).
const maxExperts = 1024

// validate reports a config the layer cannot run.
func (c *MoEConfig) validate() error {
	switch {
	case c.Dim <= 0 || c.Hidden <= 0:
		return fmt.Errorf("moe: bad widths dim %d, hidden %d", c.Dim, c.Hidden)
	case c.Experts <= 0 || c.TopK <= 0 || c.TopK > c.Experts || c.Experts > maxExperts:
		return fmt.Errorf("moe: top-%d of %d experts (at most %d)", c.TopK, c.Experts, maxExperts)
	case c.Routing > RouteTopKSoftmax:
		return fmt.Errorf("moe: unknown routing %d", c.Routing)
	case c.Act > ActClampedSwiGLU:
		return fmt.Errorf("moe: unknown activation %d", c.Act)
	case c.Act == ActClampedSwiGLU && !(c.Limit > 0):
		return fmt.Errorf("moe: clamped SwiGLU needs a positive limit, got %v", c.Limit)
	}
	return nil
}

// Matrix is a weight matrix in its stored format, [Rows × Cols] as
// nn.Linear stores it (out × in): F32 (F holds it) or a block format in Q
// (kernels.Q8_0 or kernels.MXFP4).
type Matrix struct {
	DT         kernels.DType
	Rows, Cols int
	F          []float32
	Q          []byte
}

// check reports whether m is a rows × cols matrix the layer can read: F32,
// Q8_0 or MXFP4 on the host path, any stored encoding once bound to a
// backend (anyType).
func (m *Matrix) check(name string, rows, cols int, anyType bool) error {
	if m.Rows != rows || m.Cols != cols {
		return fmt.Errorf("%s: shape %d×%d, want %d×%d", name, m.Rows, m.Cols, rows, cols)
	}
	switch m.DT {
	case kernels.F32:
		if len(m.F) != rows*cols {
			return fmt.Errorf("%s: %d floats, want %d", name, len(m.F), rows*cols)
		}
	case kernels.Q8_0, kernels.MXFP4:
		if cols%32 != 0 || len(m.Q) != rows*m.DT.RowBytes(cols) {
			return fmt.Errorf("%s: %d bytes of %s for %d×%d", name, len(m.Q), m.DT, rows, cols)
		}
	case kernels.F16, kernels.BF16, kernels.Q4_0, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K:
		if !anyType {
			return fmt.Errorf("%s: %s experts are not supported (without a backend)", name, m.DT)
		}
		if cols%m.DT.BlockValues() != 0 || len(m.Q) != rows*m.DT.RowBytes(cols) {
			return fmt.Errorf("%s: %d bytes of %s for %d×%d", name, len(m.Q), m.DT, rows, cols)
		}
	default:
		return fmt.Errorf("%s: %s experts are not supported", name, m.DT)
	}
	return nil
}

// dotRow returns row r of m dotted with x.
func (m *Matrix) dotRow(r int, x []float32) float32 {
	switch m.DT {
	case kernels.Q8_0:
		rb := m.DT.RowBytes(m.Cols)
		return kernels.DotQ8_0(x, m.Q[r*rb:(r+1)*rb])
	case kernels.MXFP4:
		rb := quant.MXFP4RowBytes(m.Cols)
		return kernels.DotMXFP4(x, m.Q[r*rb:(r+1)*rb])
	}
	return kernels.Dot(x, m.F[r*m.Cols:(r+1)*m.Cols])
}

// Expert is one expert's feed-forward weights. Biases are nil when the
// family has none (gpt-oss has all three).
//
// gpt-oss stores gate and up fused and interleaved (gate_up_proj rows 2i
// and 2i+1 are gate row i and up row i); loaders split the rows, which needs
// no re-encoding in MXFP4 since every row is whole blocks.
type Expert struct {
	Gate, Up Matrix // [Hidden × Dim]
	Down     Matrix // [Dim × Hidden]
	GateBias []float32
	UpBias   []float32
	DownBias []float32
}

// empty reports whether the expert has no weights at all.
func (ex *Expert) empty() bool {
	for _, m := range []*Matrix{&ex.Gate, &ex.Up, &ex.Down} {
		if m.F != nil || m.Q != nil {
			return false
		}
	}
	return true
}

// MoE is one mixture-of-experts block.
type MoE struct {
	Cfg MoEConfig
	// Router is [Experts × Dim]; RouterBias is nil or [Experts] (gpt-oss).
	Router     Matrix
	RouterBias []float32
	Experts    []Expert

	exec *moeExec // set by Bind: experts run on a backend (moe_exec.go)
}

// Validate checks that every tensor has the shape Cfg says.
func (m *MoE) Validate() error { return m.validate(m.exec != nil) }

// validate is Validate, accepting every stored expert encoding and
// experts with no weights when anyType (a backend runs the experts).
func (m *MoE) validate(anyType bool) error {
	c := &m.Cfg
	if err := c.validate(); err != nil {
		return err
	}
	if err := m.Router.check("router", c.Experts, c.Dim, false); err != nil {
		return fmt.Errorf("moe: %w", err)
	}
	if m.RouterBias != nil && len(m.RouterBias) != c.Experts {
		return fmt.Errorf("moe: router bias has %d values, want %d", len(m.RouterBias), c.Experts)
	}
	if len(m.Experts) != c.Experts {
		return fmt.Errorf("moe: %d experts, config says %d", len(m.Experts), c.Experts)
	}
	for e := range m.Experts {
		ex := &m.Experts[e]
		if anyType && ex.empty() {
			continue // bound: Forward fails if a token chooses it
		}
		for _, mc := range []struct {
			name       string
			m          *Matrix
			rows, cols int
		}{{"gate", &ex.Gate, c.Hidden, c.Dim}, {"up", &ex.Up, c.Hidden, c.Dim}, {"down", &ex.Down, c.Dim, c.Hidden}} {
			if err := mc.m.check(mc.name, mc.rows, mc.cols, anyType); err != nil {
				return fmt.Errorf("moe: expert %d: %w", e, err)
			}
		}
		for _, bc := range []struct {
			name string
			b    []float32
			n    int
		}{{"gate bias", ex.GateBias, c.Hidden}, {"up bias", ex.UpBias, c.Hidden}, {"down bias", ex.DownBias, c.Dim}} {
			if bc.b != nil && len(bc.b) != bc.n {
				return fmt.Errorf("moe: expert %d: %s has %d values, want %d", e, bc.name, len(bc.b), bc.n)
			}
		}
	}
	return nil
}

// MoEScratch is the working memory of Forward for up to MaxTokens tokens.
// Forward allocates nothing once it is made.
type MoEScratch struct {
	MaxTokens int
	logits    []float32 // [MaxTokens × Experts]
	choice    []int32   // [MaxTokens × TopK] expert ids
	weight    []float32 // [MaxTokens × TopK]
	count     []int32   // [Experts + 1] tokens per expert, then offsets
	order     []int32   // [MaxTokens × TopK] slots (token*TopK + k), grouped by expert
	gate, up  []float32 // [MaxTokens × Hidden] one expert's group
	y         []float32 // [MaxTokens × Dim] one expert's group

	// RowsRead counts the weight rows Forward read (router excluded) since
	// the scratch was made: the test of "each active expert once per step".
	RowsRead int64

	exec *moeExecScratch // the backend's working memory once bound
}

// NewScratch makes the working memory for batches of up to maxTokens.
func (m *MoE) NewScratch(maxTokens int) *MoEScratch {
	c := &m.Cfg
	s := &MoEScratch{
		MaxTokens: maxTokens,
		logits:    make([]float32, maxTokens*c.Experts),
		choice:    make([]int32, maxTokens*c.TopK),
		weight:    make([]float32, maxTokens*c.TopK),
		count:     make([]int32, c.Experts+1),
		order:     make([]int32, maxTokens*c.TopK),
		gate:      make([]float32, maxTokens*c.Hidden),
		up:        make([]float32, maxTokens*c.Hidden),
		y:         make([]float32, maxTokens*c.Dim),
	}
	if m.exec != nil {
		s.exec = m.newExecScratch(maxTokens)
	}
	return s
}

// Route computes, for n tokens of x ([n × Dim]), the chosen experts and
// their weights, returned as [n × TopK] slices of s (valid until the next
// call). Choices are in descending weight, the lower expert id first among
// equal logits.
func (m *MoE) Route(s *MoEScratch, x []float32, n int) (experts []int32, weights []float32) {
	c := &m.Cfg
	k := c.TopK
	bound := m.exec != nil && s.exec != nil
	if bound {
		m.routerLogits(s, x, n)
	}
	for t := 0; t < n; t++ {
		xt := x[t*c.Dim : (t+1)*c.Dim]
		lg := s.logits[t*c.Experts : (t+1)*c.Experts]
		for e := range lg {
			if !bound {
				lg[e] = m.Router.dotRow(e, xt)
			}
			if m.RouterBias != nil {
				lg[e] += m.RouterBias[e]
			}
		}
		c.route(lg, s.choice[t*k:(t+1)*k], s.weight[t*k:(t+1)*k])
	}
	return s.choice[:n*k], s.weight[:n*k]
}

// route turns one token's router logits lg (bias included; overwritten)
// into its TopK expert choices ch and weights w, as Route documents.
func (c *MoEConfig) route(lg []float32, ch []int32, w []float32) {
	if c.Routing == RouteSoftmaxTopK {
		kernels.Softmax(lg)
	}
	topK(lg, ch, w)
	switch {
	case c.Routing == RouteTopKSoftmax:
		kernels.Softmax(w)
	case c.NormTopK:
		var sum float32
		for _, v := range w {
			sum += v
		}
		for i := range w {
			w[i] /= sum
		}
	}
}

// topK writes the indices and values of the len(idx) largest values of v,
// largest first, lower index first among equals.
func topK(v []float32, idx []int32, val []float32) {
	for j := range idx {
		best := -1
		for e, x := range v {
			taken := false
			for _, p := range idx[:j] {
				if int(p) == e {
					taken = true
					break
				}
			}
			if !taken && (best < 0 || x > v[best]) {
				best = e
			}
		}
		idx[j], val[j] = int32(best), v[best]
	}
}

// Forward sets out[:n×Dim] to the block's output for the n tokens of x
// ([n × Dim], row-major). out and x must not overlap.
func (m *MoE) Forward(s *MoEScratch, out, x []float32, n int) error {
	c := &m.Cfg
	if n > s.MaxTokens || len(x) < n*c.Dim || len(out) < n*c.Dim {
		return fmt.Errorf("moe: %d tokens (x %d, out %d values) for a scratch of %d tokens of width %d", n, len(x), len(out), s.MaxTokens, c.Dim)
	}
	k := c.TopK
	choice, weight := m.Route(s, x, n)

	groupByExpert(choice, c.Experts, s.count, s.order)
	// s.count[e] is now the end of expert e's group (its start is
	// s.count[e-1], or 0).
	if m.exec != nil {
		return m.forwardExec(s, out, x, n, weight)
	}

	clear(out[:n*c.Dim])
	start := int32(0)
	for e := 0; e < c.Experts; e++ {
		end := s.count[e]
		group := s.order[start:end]
		start = end
		if len(group) == 0 {
			continue // never read an expert no token chose
		}
		ex := &m.Experts[e]
		g := len(group)
		gate, up, y := s.gate[:g*c.Hidden], s.up[:g*c.Hidden], s.y[:g*c.Dim]
		// gate and up: each weight row once, applied to every token.
		for r := 0; r < c.Hidden; r++ {
			for i, slot := range group {
				xt := x[int(slot)/k*c.Dim : (int(slot)/k+1)*c.Dim]
				gate[i*c.Hidden+r] = ex.Gate.dotRow(r, xt)
				up[i*c.Hidden+r] = ex.Up.dotRow(r, xt)
			}
		}
		s.RowsRead += int64(2 * c.Hidden)
		for i := range group {
			m.activate(ex, gate[i*c.Hidden:(i+1)*c.Hidden], up[i*c.Hidden:(i+1)*c.Hidden])
		}
		// down: each row once.
		for r := 0; r < c.Dim; r++ {
			for i := range group {
				y[i*c.Dim+r] = ex.Down.dotRow(r, gate[i*c.Hidden:(i+1)*c.Hidden])
			}
		}
		s.RowsRead += int64(c.Dim)
		// Weighted sum into each token's output.
		for i, slot := range group {
			w := weight[slot]
			ot := out[int(slot)/k*c.Dim : (int(slot)/k+1)*c.Dim]
			yi := y[i*c.Dim : (i+1)*c.Dim]
			for j, v := range yi {
				if ex.DownBias != nil {
					v += ex.DownBias[j]
				}
				ot[j] += w * v
			}
		}
	}
	return nil
}

// activate turns one token's gate and up projections (biases not yet
// added) into the expert's hidden activation, written over gate.
func (m *MoE) activate(ex *Expert, gate, up []float32) {
	c := &m.Cfg
	for j := range gate {
		g, u := gate[j], up[j]
		if ex.GateBias != nil {
			g += ex.GateBias[j]
		}
		if ex.UpBias != nil {
			u += ex.UpBias[j]
		}
		if c.Act == ActClampedSwiGLU {
			g = min(g, c.Limit)
			u = min(max(u, -c.Limit), c.Limit)
			gate[j] = g * sigmoid(c.Alpha*g) * (u + 1)
			continue
		}
		gate[j] = kernels.SiLU(g) * u
	}
}

func sigmoid(x float32) float32 { return 1 / (1 + float32(math.Exp(float64(-x)))) }

// groupByExpert orders the (token, k) slots of choice (slot token*TopK+k
// holds the expert chosen there) by expert with a counting sort: order
// lists the slots expert by expert, and count[e] ends as the end of expert
// e's group in order (its start is count[e-1], or 0). count has experts+1
// entries, order at least len(choice).
func groupByExpert(choice []int32, experts int, count, order []int32) {
	clear(count)
	for _, e := range choice {
		count[e+1]++
	}
	for e := 1; e <= experts; e++ {
		count[e] += count[e-1]
	}
	for slot, e := range choice {
		order[count[e]] = int32(slot)
		count[e]++
	}
}
