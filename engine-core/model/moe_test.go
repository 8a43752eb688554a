package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
	"github.com/sluice-llm/sluice/quant"
)

// moeFamily is one family's MoE switches for the tests.
type moeFamily struct {
	name     string
	routing  Routing
	normTopK bool
	act      Activation
	biases   bool          // gpt-oss: router and expert biases
	dt       kernels.DType // expert weight format
}

var moeFamilies = []moeFamily{
	{"qwen3moe_norm", RouteSoftmaxTopK, true, ActSwiGLU, false, kernels.F32},
	{"qwen3moe_nonorm_q8", RouteSoftmaxTopK, false, ActSwiGLU, false, kernels.Q8_0},
	{"gptoss_mxfp4", RouteTopKSoftmax, false, ActClampedSwiGLU, true, kernels.MXFP4},
	{"gptoss_f32", RouteTopKSoftmax, false, ActClampedSwiGLU, true, kernels.F32},
}

// randMatrix makes a random rows×cols matrix in dt and its decoded values
// in float64 (what the naive forward multiplies by).
func randMatrix(r *rand.Rand, dt kernels.DType, rows, cols int, scale float64) (Matrix, []float64) {
	f := make([]float32, rows*cols)
	for i := range f {
		f[i] = float32(scale * r.NormFloat64())
	}
	m := Matrix{DT: dt, Rows: rows, Cols: cols}
	dec := make([]float32, len(f))
	switch dt {
	case kernels.F32:
		m.F = f
		copy(dec, f)
	case kernels.Q8_0:
		m.Q = quant.QuantizeQ8_0(f)
		quant.DequantizeQ8_0(dec, m.Q)
	case kernels.MXFP4:
		m.Q = quant.QuantizeMXFP4(f)
		quant.DequantizeMXFP4(dec, m.Q)
	}
	out := make([]float64, len(dec))
	for i, v := range dec {
		out[i] = float64(v)
	}
	return m, out
}

func randVec(r *rand.Rand, n int, scale float64) ([]float32, []float64) {
	f := make([]float32, n)
	d := make([]float64, n)
	for i := range f {
		f[i] = float32(scale * r.NormFloat64())
		d[i] = float64(f[i])
	}
	return f, d
}

// naiveMoE is the block in float64, written from the reference
// implementations (Hugging Face Qwen3MoeSparseMoeBlock and GptOssMLP):
// every expert computed densely, weighted by the routing.
type naiveMoE struct {
	cfg                MoEConfig
	router, routerBias []float64
	gate, up, down     [][]float64
	gateB, upB, downB  [][]float64
	alpha, limit       float64
}

func newRandomMoE(fam moeFamily, dim, hidden, experts, topK int, seed uint64) (*MoE, *naiveMoE) {
	r := rand.New(rand.NewPCG(seed, 17))
	cfg := MoEConfig{Dim: dim, Hidden: hidden, Experts: experts, TopK: topK, Routing: fam.routing, NormTopK: fam.normTopK, Act: fam.act}
	if fam.act == ActClampedSwiGLU {
		cfg.Alpha, cfg.Limit = GptOssSwiGLU()
	}
	m := &MoE{Cfg: cfg}
	nv := &naiveMoE{cfg: cfg, alpha: float64(cfg.Alpha), limit: float64(cfg.Limit)}
	m.Router, nv.router = randMatrix(r, kernels.F32, experts, dim, 0.5)
	if fam.biases {
		m.RouterBias, nv.routerBias = randVec(r, experts, 0.3)
	}
	for e := 0; e < experts; e++ {
		var ex Expert
		var g, u, d []float64
		// Large enough that the clamps at ±7 are reached.
		ex.Gate, g = randMatrix(r, fam.dt, hidden, dim, 0.6)
		ex.Up, u = randMatrix(r, fam.dt, hidden, dim, 0.6)
		ex.Down, d = randMatrix(r, fam.dt, dim, hidden, 0.2)
		nv.gate, nv.up, nv.down = append(nv.gate, g), append(nv.up, u), append(nv.down, d)
		var gb, ub, db []float64
		if fam.biases {
			ex.GateBias, gb = randVec(r, hidden, 0.5)
			ex.UpBias, ub = randVec(r, hidden, 0.5)
			ex.DownBias, db = randVec(r, dim, 0.5)
		}
		nv.gateB, nv.upB, nv.downB = append(nv.gateB, gb), append(nv.upB, ub), append(nv.downB, db)
		m.Experts = append(m.Experts, ex)
	}
	return m, nv
}

func matVec64(w []float64, rows, cols int, x []float64, bias []float64) []float64 {
	out := make([]float64, rows)
	for o := 0; o < rows; o++ {
		for i := 0; i < cols; i++ {
			out[o] += w[o*cols+i] * x[i]
		}
		if bias != nil {
			out[o] += bias[o]
		}
	}
	return out
}

func softmax64(v []float64) []float64 {
	mx := math.Inf(-1)
	for _, x := range v {
		mx = math.Max(mx, x)
	}
	out := make([]float64, len(v))
	var s float64
	for i, x := range v {
		out[i] = math.Exp(x - mx)
		s += out[i]
	}
	for i := range out {
		out[i] /= s
	}
	return out
}

// route returns the chosen experts (sorted by descending score) and their
// weights for one token.
func (nv *naiveMoE) route(x []float64) ([]int, []float64) {
	c := nv.cfg
	logits := matVec64(nv.router, c.Experts, c.Dim, x, nv.routerBias)
	score := logits
	if c.Routing == RouteSoftmaxTopK {
		score = softmax64(logits)
	}
	idx := make([]int, c.Experts)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return score[idx[a]] > score[idx[b]] })
	idx = idx[:c.TopK]
	w := make([]float64, c.TopK)
	for i, e := range idx {
		w[i] = score[e]
	}
	switch {
	case c.Routing == RouteTopKSoftmax:
		w = softmax64(w)
	case c.NormTopK:
		var s float64
		for _, v := range w {
			s += v
		}
		for i := range w {
			w[i] /= s
		}
	}
	return idx, w
}

func (nv *naiveMoE) expert(e int, x []float64) []float64 {
	c := nv.cfg
	g := matVec64(nv.gate[e], c.Hidden, c.Dim, x, nv.gateB[e])
	u := matVec64(nv.up[e], c.Hidden, c.Dim, x, nv.upB[e])
	h := make([]float64, c.Hidden)
	for j := range h {
		if c.Act == ActClampedSwiGLU {
			gj := math.Min(g[j], nv.limit)
			uj := math.Max(math.Min(u[j], nv.limit), -nv.limit)
			h[j] = gj / (1 + math.Exp(-nv.alpha*gj)) * (uj + 1)
		} else {
			h[j] = g[j] / (1 + math.Exp(-g[j])) * u[j]
		}
	}
	return matVec64(nv.down[e], c.Dim, c.Hidden, h, nv.downB[e])
}

func (nv *naiveMoE) forward(x []float64) []float64 {
	idx, w := nv.route(x)
	out := make([]float64, nv.cfg.Dim)
	for i, e := range idx {
		y := nv.expert(e, x)
		for j := range out {
			out[j] += w[i] * y[j]
		}
	}
	return out
}

// TestMoEAgainstNaive runs the grouped block and the float64 naive block on
// the same random weights for each family (routing, normalisation,
// activation, biases, stored format) and batch sizes from 1 to 24 tokens.
func TestMoEAgainstNaive(t *testing.T) {
	for _, fam := range moeFamilies {
		for _, sh := range []struct{ dim, hidden, experts, topK, n int }{
			{64, 32, 8, 2, 1}, {64, 32, 8, 2, 7}, {32, 64, 16, 4, 24}, {96, 64, 4, 4, 5},
		} {
			name := fmt.Sprintf("%s/d%d_h%d_e%d_k%d_n%d", fam.name, sh.dim, sh.hidden, sh.experts, sh.topK, sh.n)
			t.Run(name, func(t *testing.T) {
				m, nv := newRandomMoE(fam, sh.dim, sh.hidden, sh.experts, sh.topK, uint64(sh.n*31+sh.experts))
				if err := m.Validate(); err != nil {
					t.Fatal(err)
				}
				r := rand.New(rand.NewPCG(uint64(sh.n), 5))
				x, x64 := randVec(r, sh.n*sh.dim, 1)
				s := m.NewScratch(sh.n)
				out := make([]float32, sh.n*sh.dim)
				if err := m.Forward(s, out, x, sh.n); err != nil {
					t.Fatal(err)
				}
				clamped := 0
				for tok := 0; tok < sh.n; tok++ {
					want := nv.forward(x64[tok*sh.dim : (tok+1)*sh.dim])
					var norm float64
					for _, v := range want {
						norm = math.Max(norm, math.Abs(v))
					}
					for j, v := range want {
						if d := math.Abs(float64(out[tok*sh.dim+j]) - v); d > 1e-4*(1+norm) {
							t.Fatalf("token %d [%d]: %v, want %v", tok, j, out[tok*sh.dim+j], v)
						}
					}
					for e := range m.Experts {
						for _, g := range matVec64(nv.gate[e], sh.hidden, sh.dim, x64[tok*sh.dim:(tok+1)*sh.dim], nv.gateB[e]) {
							if g > 7 {
								clamped++
							}
						}
					}
				}
				if fam.act == ActClampedSwiGLU && sh.n > 4 && clamped == 0 {
					t.Errorf("no gate value reached the clamp; the test does not exercise it")
				}
			})
		}
	}
}

// TestMoERouting checks the chosen experts and weights against the naive
// routing, and that weights sum to 1 where the family normalises.
func TestMoERouting(t *testing.T) {
	for _, fam := range moeFamilies {
		t.Run(fam.name, func(t *testing.T) {
			const n, dim = 9, 64
			m, nv := newRandomMoE(fam, dim, 32, 16, 4, 3)
			r := rand.New(rand.NewPCG(1, 1))
			x, x64 := randVec(r, n*dim, 1)
			s := m.NewScratch(n)
			choice, weight := m.Route(s, x, n)
			for tok := 0; tok < n; tok++ {
				idx, w := nv.route(x64[tok*dim : (tok+1)*dim])
				var sum float32
				for k := range idx {
					if int(choice[tok*4+k]) != idx[k] || math.Abs(float64(weight[tok*4+k])-w[k]) > 1e-5 {
						t.Fatalf("token %d: experts %v weights %v, want %v %v", tok, choice[tok*4:tok*4+4], weight[tok*4:tok*4+4], idx, w)
					}
					sum += weight[tok*4+k]
				}
				if (fam.normTopK || fam.routing == RouteTopKSoftmax) && math.Abs(float64(sum)-1) > 1e-5 {
					t.Errorf("token %d: weights sum to %v", tok, sum)
				}
			}
		})
	}
}

// TestMoEReadsActiveExpertsOnce checks the grouping: a step reads each
// chosen expert's rows once, whatever the number of tokens, and no row of an
// expert nobody chose.
func TestMoEReadsActiveExpertsOnce(t *testing.T) {
	fam := moeFamilies[2]
	const dim, hidden, experts = 64, 32, 8
	m, _ := newRandomMoE(fam, dim, hidden, experts, 2, 11)
	testReadsOnce(t, m, dim, hidden)
	// Bound to the CPU backend (moe_exec.go): the same rows.
	be := cpu.New(cpu.Options{Threads: 2, QuantizeActivations: true})
	defer be.Close()
	if err := m.Bind(be); err != nil {
		t.Fatal(err)
	}
	testReadsOnce(t, m, dim, hidden)
	m.exec = nil
	// An expert with no weights at all is fine as long as nobody picks it.
	m.Experts[experts-1] = Expert{}
	m.RouterBias[experts-1] = -1e9
	s := m.NewScratch(4)
	x, _ := randVec(rand.New(rand.NewPCG(9, 9)), 4*dim, 1)
	if err := m.Forward(s, make([]float32, 4*dim), x, 4); err != nil {
		t.Fatal(err)
	}
}

// testReadsOnce checks that a step reads each chosen expert's rows once.
func testReadsOnce(t *testing.T, m *MoE, dim, hidden int) {
	t.Helper()
	for _, n := range []int{1, 4, 16, 64} {
		r := rand.New(rand.NewPCG(uint64(n), 2))
		x, _ := randVec(r, n*dim, 1)
		s := m.NewScratch(n)
		choice, _ := m.Route(s, x, n)
		active := map[int32]bool{}
		for _, e := range choice {
			active[e] = true
		}
		out := make([]float32, n*dim)
		if err := m.Forward(s, out, x, n); err != nil {
			t.Fatal(err)
		}
		if want := int64(len(active) * (2*hidden + dim)); s.RowsRead != want {
			t.Errorf("n=%d bound=%v: read %d rows, want %d (%d active experts once each)", n, m.exec != nil, s.RowsRead, want, len(active))
		}
	}
}

func TestMoEForwardAllocatesNothing(t *testing.T) {
	m, _ := newRandomMoE(moeFamilies[2], 64, 32, 8, 2, 4)
	be := cpu.New(cpu.Options{Threads: 2, QuantizeActivations: true})
	defer be.Close()
	const n = 8
	x, _ := randVec(rand.New(rand.NewPCG(2, 2)), n*64, 1)
	for _, bound := range []bool{false, true} {
		if bound {
			if err := m.Bind(be); err != nil {
				t.Fatal(err)
			}
		}
		s := m.NewScratch(n)
		out := make([]float32, n*64)
		if a := testing.AllocsPerRun(20, func() { _ = m.Forward(s, out, x, n) }); a != 0 {
			t.Errorf("bound=%v: Forward allocates %v times per call", bound, a)
		}
		if err := m.Forward(s, out, x, n+1); err == nil {
			t.Errorf("bound=%v: more tokens than the scratch holds accepted", bound)
		}
	}
}

func TestMoEValidate(t *testing.T) {
	good := func() *MoE { m, _ := newRandomMoE(moeFamilies[2], 64, 32, 4, 2, 1); return m }
	tests := []struct {
		name string
		edit func(*MoE)
		want string
	}{
		{"topk > experts", func(m *MoE) { m.Cfg.TopK = 5 }, "top-5 of 4"},
		{"no limit", func(m *MoE) { m.Cfg.Limit = 0 }, "positive limit"},
		{"router shape", func(m *MoE) { m.Router.Rows = 3 }, "router"},
		{"router bias", func(m *MoE) { m.RouterBias = m.RouterBias[:2] }, "router bias"},
		{"expert count", func(m *MoE) { m.Experts = m.Experts[:3] }, "3 experts"},
		{"gate bytes", func(m *MoE) { m.Experts[1].Gate.Q = m.Experts[1].Gate.Q[:10] }, "expert 1: gate"},
		{"down shape", func(m *MoE) { m.Experts[0].Down.Cols = 64 }, "expert 0: down"},
		{"bias length", func(m *MoE) { m.Experts[2].DownBias = nil; m.Experts[2].UpBias = make([]float32, 3) }, "up bias"},
		{"format", func(m *MoE) { m.Experts[0].Up.DT = kernels.Q4_K }, "Q4_K experts are not supported"},
	}
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := good()
			tc.edit(m)
			if err := m.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want mention of %q", err, tc.want)
			}
		})
	}
}

// BenchmarkMoE measures one gpt-oss-20b-shaped MoE block step (dim 2880,
// 32 experts of 2880, top-4, MXFP4 experts) at 1 and 16 tokens, reporting
// expert weight bytes read per second.
//
//	go test -run XXX -bench MoE ./engine-core/model/
func BenchmarkMoE(b *testing.B) {
	const dim, hidden, experts = 2880, 2880, 32
	r := rand.New(rand.NewPCG(1, 2))
	m := &MoE{Cfg: MoEConfig{Dim: dim, Hidden: hidden, Experts: experts, TopK: 4, Routing: RouteTopKSoftmax, Act: ActClampedSwiGLU}}
	m.Cfg.Alpha, m.Cfg.Limit = GptOssSwiGLU()
	m.Router, _ = randMatrix(r, kernels.F32, experts, dim, 0.05)
	// One shared random expert keeps the benchmark's memory small; the
	// grouping still reads it once per chosen expert.
	var ex Expert
	ex.Gate, _ = randMatrix(r, kernels.MXFP4, hidden, dim, 0.05)
	ex.Up, _ = randMatrix(r, kernels.MXFP4, hidden, dim, 0.05)
	ex.Down, _ = randMatrix(r, kernels.MXFP4, dim, hidden, 0.05)
	for range experts {
		m.Experts = append(m.Experts, ex)
	}
	perExpert := int64(len(ex.Gate.Q) + len(ex.Up.Q) + len(ex.Down.Q))
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			x, _ := randVec(r, n*dim, 1)
			s := m.NewScratch(n)
			out := make([]float32, n*dim)
			for b.Loop() {
				_ = m.Forward(s, out, x, n)
			}
			b.ReportMetric(float64(s.RowsRead)/float64(2*hidden+dim)/float64(b.N), "experts/op")
			b.SetBytes(perExpert * s.RowsRead / int64(2*hidden+dim) / int64(max(b.N, 1)))
		})
	}
}
