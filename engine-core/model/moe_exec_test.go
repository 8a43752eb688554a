package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
	"github.com/sluice-llm/sluice/quant"
)

// execBackends are the backends the bound MoE block is checked on, with
// the tolerance (relative to the output's largest value) against the
// float64 naive block for block-format experts: the reference backend
// multiplies float activations in float64; the CPU backend quantizes
// activations to int8 for block formats (half a step of each block's
// largest value per element, compounded through gate/up, the activation
// and down; measured 1–2 % here, with weights scaled up to reach the
// clamps). F32 experts get 1e-4 on both, and the reference backend 1e-4 on
// every format: the wiring (groups, activation, weighted sum) is exact;
// the CPU kernels' own error bound is checked in kernels/cpu.
func execBackends() []struct {
	be  kernels.Backend
	tol float64
} {
	return []struct {
		be  kernels.Backend
		tol float64
	}{
		{kernels.NewRef(), 1e-4},
		{cpu.New(cpu.Options{Threads: 2, QuantizeActivations: true}), 5e-2},
	}
}

// randExpertMatrix is randMatrix for every expert format, Q4_K included
// (Qwen3-MoE's GGUF experts).
func randExpertMatrix(r *rand.Rand, dt kernels.DType, rows, cols int, scale float64) (Matrix, []float64) {
	if dt != kernels.Q4_K {
		return randMatrix(r, dt, rows, cols, scale)
	}
	f := make([]float32, rows*cols)
	for i := range f {
		f[i] = float32(scale * r.NormFloat64())
	}
	m := Matrix{DT: dt, Rows: rows, Cols: cols, Q: quant.AppendQ4K(nil, f)}
	dec := make([]float32, len(f))
	quant.DequantizeQ4K(dec, m.Q)
	out := make([]float64, len(dec))
	for i, v := range dec {
		out[i] = float64(v)
	}
	return m, out
}

// TestMoEBackendAgainstNaive runs the block bound to each backend (experts
// through MatMulExperts) against the float64 naive block for every family,
// Qwen3-MoE with Q4_K experts too, at 1 to 24 tokens.
func TestMoEBackendAgainstNaive(t *testing.T) {
	fams := append(append([]moeFamily(nil), moeFamilies...), moeFamily{"qwen3moe_q4k", RouteSoftmaxTopK, true, ActSwiGLU, false, kernels.Q4_K})
	for _, eb := range execBackends() {
		defer eb.be.Close()
		for _, fam := range fams {
			tol := eb.tol
			if fam.dt == kernels.F32 {
				tol = 1e-4
			}
			hidden := 64 // a multiple of 256 for Q4_K (down's rows)
			if fam.dt == kernels.Q4_K {
				hidden = 256
			}
			for _, sh := range []struct{ dim, hidden, experts, topK, n int }{
				{256, hidden, 8, 2, 1}, {256, hidden + hidden/2, 8, 2, 7}, {256, hidden, 16, 4, 24}, {512, hidden, 4, 4, 5},
			} {
				if sh.hidden%fam.dt.BlockValues() != 0 {
					sh.hidden = hidden
				}
				name := fmt.Sprintf("%s/%s/d%d_h%d_e%d_k%d_n%d", eb.be.Name(), fam.name, sh.dim, sh.hidden, sh.experts, sh.topK, sh.n)
				t.Run(name, func(t *testing.T) {
					m, nv := newRandomMoEOf(fam, sh.dim, sh.hidden, sh.experts, sh.topK, uint64(sh.n*31+sh.experts))
					if err := m.Bind(eb.be); err != nil {
						t.Fatal(err)
					}
					r := rand.New(rand.NewPCG(uint64(sh.n), 5))
					x, x64 := randVec(r, sh.n*sh.dim, 1)
					s := m.NewScratch(sh.n)
					out := make([]float32, sh.n*sh.dim)
					if err := m.Forward(s, out, x, sh.n); err != nil {
						t.Fatal(err)
					}
					for tok := 0; tok < sh.n; tok++ {
						want := nv.forward(x64[tok*sh.dim : (tok+1)*sh.dim])
						var norm float64
						for _, v := range want {
							norm = math.Max(norm, math.Abs(v))
						}
						for j, v := range want {
							if d := math.Abs(float64(out[tok*sh.dim+j]) - v); d > tol*(1+norm) {
								t.Fatalf("token %d [%d]: %v, want %v (max |out| %v)", tok, j, out[tok*sh.dim+j], v, norm)
							}
						}
					}
				})
			}
		}
	}
}

// newRandomMoEOf is newRandomMoE for any expert format.
func newRandomMoEOf(fam moeFamily, dim, hidden, experts, topK int, seed uint64) (*MoE, *naiveMoE) {
	if fam.dt != kernels.Q4_K {
		return newRandomMoE(fam, dim, hidden, experts, topK, seed)
	}
	f32 := fam
	f32.dt = kernels.F32
	m, nv := newRandomMoE(f32, dim, hidden, experts, topK, seed)
	r := rand.New(rand.NewPCG(seed, 18))
	for e := range m.Experts {
		ex := &m.Experts[e]
		ex.Gate, nv.gate[e] = randExpertMatrix(r, kernels.Q4_K, hidden, dim, 0.6)
		ex.Up, nv.up[e] = randExpertMatrix(r, kernels.Q4_K, hidden, dim, 0.6)
		ex.Down, nv.down[e] = randExpertMatrix(r, kernels.Q4_K, dim, hidden, 0.2)
	}
	return m, nv
}

// hiddenBackend hides the CPU backend's MatMulExperts.
type hiddenBackend struct{ kernels.Backend }

// TestMoEBindErrors lists what Bind and the bound Forward refuse.
func TestMoEBindErrors(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 1})
	defer be.Close()
	m, _ := newRandomMoE(moeFamilies[2], 64, 32, 4, 2, 1)
	if err := m.Bind(hiddenBackend{be}); err == nil || !strings.Contains(err.Error(), "no MatMulExperts") {
		t.Errorf("backend without MatMulExperts: %v", err)
	}
	m.Experts[1].Up.Q = m.Experts[1].Up.Q[:5]
	if err := m.Bind(be); err == nil || !strings.Contains(err.Error(), "expert 1: up") {
		t.Errorf("short expert: %v", err)
	}
	m, _ = newRandomMoE(moeFamilies[2], 64, 32, 4, 2, 1)
	s := m.NewScratch(2)
	m.Experts[3] = Expert{}
	if err := m.Bind(be); err != nil {
		t.Fatal(err)
	}
	x, _ := randVec(rand.New(rand.NewPCG(1, 2)), 2*64, 1)
	if err := m.Forward(s, make([]float32, 2*64), x, 2); err == nil || !strings.Contains(err.Error(), "before Bind") {
		t.Errorf("scratch made before Bind: %v", err)
	}
	m.RouterBias[3] = 1e9 // everyone picks the expert with no weights
	if err := m.Forward(m.NewScratch(2), make([]float32, 2*64), x, 2); err == nil || !strings.Contains(err.Error(), "expert 3 was chosen") {
		t.Errorf("chosen expert without weights: %v", err)
	}
}

// randStoredMatrix is a rows×cols matrix of random bytes in a block format
// with its scale fields set to modest values: quick to make at real
// shapes (hundreds of MB), and every byte distinct, so that no expert
// reads another's weights from cache.
func randStoredMatrix(r *rand.Rand, dt kernels.DType, rows, cols int) Matrix {
	q := make([]byte, rows*dt.RowBytes(cols))
	for i := 0; i < len(q); i += 8 {
		v := r.Uint64()
		for j := i; j < min(i+8, len(q)); j++ {
			q[j] = byte(v)
			v >>= 8
		}
	}
	h := func(b []byte, v float32) { b[0], b[1] = byte(quant.F32ToF16(v)), byte(quant.F32ToF16(v)>>8) }
	switch dt {
	case kernels.MXFP4:
		for b := 0; b < len(q); b += quant.MXFP4BlockBytes {
			q[b] = byte(118 + r.IntN(8))
		}
	case kernels.Q4_K:
		for b := 0; b < len(q); b += quant.Q4KBlockBytes {
			h(q[b:], 0.001)
			h(q[b+2:], 0.001)
		}
	case kernels.Q6_K:
		for b := 0; b < len(q); b += quant.Q6KBlockBytes {
			h(q[b+208:], 0.0005)
		}
	default:
		panic("randStoredMatrix: " + dt.String())
	}
	return Matrix{DT: dt, Rows: rows, Cols: cols, Q: q}
}

// moeBenchShapes are real MoE block shapes: gpt-oss-20b (hidden 2880, 32
// experts of 2880, top-4, MXFP4 experts, router and expert biases) and
// Qwen3-30B-A3B (hidden 2048, 128 experts of 768, top-8; Q4_K gate/up and
// Q6_K down, llama-quantize's Q4_K_M choice for the expert tensors of
// half its layers).
var moeBenchShapes = []struct {
	name                       string
	dim, hidden, experts, topK int
	gateDT, downDT             kernels.DType
	routing                    Routing
	act                        Activation
	biases, norm               bool
}{
	{"gpt-oss-20b", 2880, 2880, 32, 4, kernels.MXFP4, kernels.MXFP4, RouteTopKSoftmax, ActClampedSwiGLU, true, false},
	{"qwen3-30b-a3b", 2048, 768, 128, 8, kernels.Q4_K, kernels.Q6_K, RouteSoftmaxTopK, ActSwiGLU, false, true},
}

// BenchmarkMoEBlock measures one MoE block step at real shapes with
// distinct random experts, at 1 and 16 tokens: bound to the CPU backend
// (cpu: MatMulExperts on both cores) and, for gpt-oss-20b, the host
// reference it replaces (host). It reports ms per token, the experts read
// per step, their bytes per second (SetBytes: the active experts' bytes
// per step) and per CPU-second. Steps cycle through 16 random inputs, so
// that the chosen experts change from step to step.
//
//	go test ./engine-core/model -run XXX -bench MoEBlock -benchtime 20x
func BenchmarkMoEBlock(b *testing.B) {
	be := cpu.New(cpu.Options{QuantizeActivations: true})
	defer be.Close()
	for _, sh := range moeBenchShapes {
		r := rand.New(rand.NewPCG(20, 9))
		m := &MoE{Cfg: MoEConfig{Dim: sh.dim, Hidden: sh.hidden, Experts: sh.experts, TopK: sh.topK, Routing: sh.routing, NormTopK: sh.norm, Act: sh.act}}
		if sh.act == ActClampedSwiGLU {
			m.Cfg.Alpha, m.Cfg.Limit = GptOssSwiGLU()
		}
		m.Router, _ = randMatrix(r, kernels.F32, sh.experts, sh.dim, 0.05)
		if sh.biases {
			m.RouterBias, _ = randVec(r, sh.experts, 0.1)
		}
		for range sh.experts {
			ex := Expert{
				Gate: randStoredMatrix(r, sh.gateDT, sh.hidden, sh.dim),
				Up:   randStoredMatrix(r, sh.gateDT, sh.hidden, sh.dim),
				Down: randStoredMatrix(r, sh.downDT, sh.dim, sh.hidden),
			}
			if sh.biases {
				ex.GateBias, _ = randVec(r, sh.hidden, 0.1)
				ex.UpBias, _ = randVec(r, sh.hidden, 0.1)
				ex.DownBias, _ = randVec(r, sh.dim, 0.1)
			}
			m.Experts = append(m.Experts, ex)
		}
		perExpert := int64(len(m.Experts[0].Gate.Q) + len(m.Experts[0].Up.Q) + len(m.Experts[0].Down.Q))
		rowsPerExpert := int64(2*sh.hidden + sh.dim)
		for _, v := range []string{"cpu", "host"} {
			if v == "host" && sh.name != "gpt-oss-20b" {
				continue
			}
			m.exec = nil
			if v == "cpu" {
				if err := m.Bind(be); err != nil {
					b.Fatal(err)
				}
			}
			for _, n := range []int{1, 16} {
				b.Run(fmt.Sprintf("%s/%s/tokens=%d", sh.name, v, n), func(b *testing.B) {
					// distinct inputs route to different experts each step,
					// so that weights come from memory as in a real decode
					// (one layer's 32 or 128 experts exceed the caches)
					var xs [][]float32
					for range 16 {
						x, _ := randVec(r, n*sh.dim, 1)
						xs = append(xs, x)
					}
					s := m.NewScratch(n)
					out := make([]float32, n*sh.dim)
					stats := os.Getenv("SLUICE_BENCH_OPSTATS") != "" && v == "cpu"
					if stats {
						be.RecordOps(true) // locks the pool's threads: off for the figures compared
					}
					c0 := processCPUSeconds()
					for i := 0; b.Loop(); i++ {
						if err := m.Forward(s, out, xs[i%len(xs)], n); err != nil {
							b.Fatal(err)
						}
					}
					cpuS := processCPUSeconds() - c0
					if stats {
						st := be.OpStats()
						be.RecordOps(false)
						b.ReportMetric(100*st.Imbalance(), "op-wait-%")
						if cpuS > 0 {
							b.ReportMetric(100*st.ChunkCPU.Seconds()/cpuS, "ops-cpu-%")
						}
					}
					experts := float64(s.RowsRead) / float64(rowsPerExpert) / float64(b.N)
					bytes := experts * float64(perExpert)
					b.SetBytes(int64(bytes))
					b.ReportMetric(experts, "experts/op")
					b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)/float64(n), "ms/token")
					if cpuS > 0 {
						b.ReportMetric(bytes*float64(b.N)/cpuS/1e9, "GB/cpu-s")
					}
				})
			}
		}
	}
}
