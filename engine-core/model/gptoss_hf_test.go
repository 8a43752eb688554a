package model

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
	"github.com/sluice-llm/sluice/modelfile/demo"
	"github.com/sluice-llm/sluice/modelfile/safetensors"
	"github.com/sluice-llm/sluice/quant"
)

// genGptOss is a gpt-oss geometry for gen-model's Hugging Face writer whose
// YaRN parameters (factor 8 over 16 positions) and window are the ones
// moeModel's naive forward implements.
var genGptOss = demo.RealShape{Name: "gpt-oss-gen", Arch: "gpt-oss", Dim: 64, Hidden: 64, Layers: 3, Heads: 4, KVHeads: 2,
	HeadDim: 16, Vocab: 211, MaxPos: 4096, RopeTheta: 150000, NormEps: 1e-5, QKVBias: true, Experts: 5, TopK: 2,
	ExpertHidden: 32, SlidingWindow: 5, YaRNFactor: 8, YaRNOrigPos: 16}

// TestGeneratedGptOssHF loads a checkpoint written by gen-model's
// Hugging Face writer (published gpt-oss layout, split in several shards
// with an index) and checks every position's logits, on the ref and cpu
// backends, against the naive float64 forward of the same weights read
// back from the files independently of the loader.
func TestGeneratedGptOssHF(t *testing.T) {
	dir := t.TempDir()
	if err := demo.GenerateHFShape(dir, genGptOss, 5, 64<<10); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors.index.json")); err != nil {
		t.Fatalf("want a sharded checkpoint: %v", err)
	}
	mm := moeFromHF(t, dir)
	r := rand.New(rand.NewPCG(5, 5))
	toks := make([]int32, 24)
	for i := range toks {
		toks[i] = int32(r.IntN(mm.vocab))
	}
	want := mm.naiveLogits(toks)
	for _, bn := range []string{"cpu", "ref"} {
		var be kernels.Backend = kernels.NewRef()
		if bn == "cpu" {
			be = cpu.New(cpu.Options{Threads: 2})
		}
		m, err := Load(dir, be, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m.Cfg.MoE == nil || m.Cfg.MoE.Family != "gpt_oss" {
			t.Fatalf("loaded %+v, want gpt_oss", m.Cfg.MoE)
		}
		got := allLogits(t, m, toks, []int{9, 1, 6, 8})
		m.Close()
		be.Close()
		var maxErr, maxAbs float64
		for i := range want {
			for j := range want[i] {
				maxErr = math.Max(maxErr, math.Abs(float64(got[i][j])-want[i][j]))
				maxAbs = math.Max(maxAbs, math.Abs(want[i][j]))
			}
		}
		if maxAbs == 0 || maxErr > 1e-4*math.Max(1, maxAbs) {
			t.Errorf("%s: max |fast - naive| = %g (max |logit| %g)", bn, maxErr, maxAbs)
		}
	}
}

// moeFromHF reads a gpt-oss checkpoint in the published layout into a
// moeModel (float64 weights under moeModel's per-expert names), decoding
// BF16 and the split MXFP4 blocks itself.
func moeFromHF(t *testing.T, dir string) *moeModel {
	t.Helper()
	cb, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(cb, &cfg); err != nil {
		t.Fatal(err)
	}
	num := func(k string) int { return int(cfg[k].(float64)) }
	m := &moeModel{family: "gpt_oss", cfg: cfg, w: map[string][]float64{}, dim: map[string][2]int{}, mx: map[string][]byte{},
		dimModel: num("hidden_size"), expHidden: num("intermediate_size"), layers: num("num_hidden_layers"),
		heads: num("num_attention_heads"), kvHeads: num("num_key_value_heads"), hd: num("head_dim"), vocab: num("vocab_size"),
		experts: num("num_local_experts"), topK: num("num_experts_per_tok"), window: num("sliding_window"), denseLayer: map[int]bool{}}
	m.hidden = m.expHidden
	st, err := safetensors.OpenModel(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	bf16 := func(b []byte) []float64 {
		out := make([]float64, len(b)/2)
		for i := range out {
			out[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16))
		}
		return out
	}
	data := func(name string) ([]byte, []int) {
		b, ti, _, err := st.TensorData(name)
		if err != nil {
			t.Fatal(err)
		}
		return b, ti.Shape
	}
	D, H, E := m.dimModel, m.expHidden, m.experts
	for _, name := range st.Names() {
		if strings.Contains(name, ".mlp.experts.") {
			continue
		}
		b, sh := data(name)
		m.w[name] = bf16(b)
		if len(sh) == 1 {
			m.dim[name] = [2]int{1, sh[0]}
		} else {
			m.dim[name] = [2]int{sh[0], sh[1]}
		}
	}
	// mxRows turns rows of split blocks/scales into ggml bytes and values
	mxRows := func(name string, blocks, scales []byte, rows, cols int) {
		nb := rows * cols / 32
		q := make([]byte, nb*quant.MXFP4BlockBytes)
		if err := quant.MXFP4FromSplit(q, blocks[:16*nb], scales[:nb]); err != nil {
			t.Fatal(err)
		}
		f := make([]float32, rows*cols)
		quant.DequantizeMXFP4(f, q)
		w := make([]float64, len(f))
		for i, v := range f {
			w[i] = float64(v)
		}
		m.mx[name], m.w[name], m.dim[name] = q, w, [2]int{rows, cols}
	}
	for l := 0; l < m.layers; l++ {
		p := fmt.Sprintf("model.layers.%d.mlp.experts.", l)
		guB, _ := data(p + "gate_up_proj_blocks")
		guS, _ := data(p + "gate_up_proj_scales")
		dnB, _ := data(p + "down_proj_blocks")
		dnS, _ := data(p + "down_proj_scales")
		guBias, _ := data(p + "gate_up_proj_bias")
		dnBias, _ := data(p + "down_proj_bias")
		gb, db := D/32, H/32
		for e := 0; e < E; e++ {
			pe := fmt.Sprintf("%s%d.", p, e)
			// gate row i is gate_up row 2i, up row i is 2i+1
			var gB, gS, uB, uS []byte
			for i := 0; i < 2*H; i++ {
				r := e*2*H + i
				bs, ss := guB[r*gb*16:(r+1)*gb*16], guS[r*gb:(r+1)*gb]
				if i%2 == 0 {
					gB, gS = append(gB, bs...), append(gS, ss...)
				} else {
					uB, uS = append(uB, bs...), append(uS, ss...)
				}
			}
			mxRows(pe+"gate_proj.weight", gB, gS, H, D)
			mxRows(pe+"up_proj.weight", uB, uS, H, D)
			mxRows(pe+"down_proj.weight", dnB[e*D*db*16:], dnS[e*D*db:], D, H)
			bias := bf16(guBias[e*4*H : (e+1)*4*H])
			g, u := make([]float64, H), make([]float64, H)
			for i := range g {
				g[i], u[i] = bias[2*i], bias[2*i+1]
			}
			m.w[pe+"gate_proj.bias"], m.w[pe+"up_proj.bias"] = g, u
			m.w[pe+"down_proj.bias"] = bf16(dnBias[e*2*D : (e+1)*2*D])
			m.dim[pe+"gate_proj.bias"], m.dim[pe+"up_proj.bias"], m.dim[pe+"down_proj.bias"] = [2]int{1, H}, [2]int{1, H}, [2]int{1, D}
		}
	}
	return m
}

// TestHFRouterWidened loads a generated gpt-oss checkpoint (BF16 routers,
// as published) and checks that every layer's router is held as F32, as a
// GGUF file of the same weights holds it: values equal to the file's BF16
// read back independently of the loader, on both backends, and on the cpu
// backend laid out in the same F32 panels as the GGUF model's router.
func TestHFRouterWidened(t *testing.T) {
	dir, gg := t.TempDir(), filepath.Join(t.TempDir(), "m.gguf")
	if err := demo.GenerateHFShape(dir, genGptOss, 5, 64<<10); err != nil {
		t.Fatal(err)
	}
	if err := demo.GenerateShape(gg, genGptOss, 5, demo.FormatGGUFMXFP4); err != nil {
		t.Fatal(err)
	}
	st, err := safetensors.OpenModel(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, bn := range []string{"cpu", "ref"} {
		var be kernels.Backend = kernels.NewRef()
		if bn == "cpu" {
			be = cpu.New(cpu.Options{Threads: 2})
		}
		hf, err := Load(dir, be, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		g, err := Load(gg, be, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for l := range hf.Layers {
			name := fmt.Sprintf("model.layers.%d.mlp.router.weight", l)
			raw, ti, _, err := st.TensorData(name)
			if err != nil || ti.DType != "BF16" {
				t.Fatalf("%s: %v, dtype %s (want the published BF16)", name, err, ti.DType)
			}
			r, gr := hf.Layers[l].Router.(*kernels.Host), g.Layers[l].Router.(*kernels.Host)
			if r.DT != kernels.F32 || r.R != genGptOss.Experts || r.C != genGptOss.Dim {
				t.Fatalf("%s %s: %s [%d × %d], want F32 [%d × %d]", bn, name, r.DT, r.R, r.C, genGptOss.Experts, genGptOss.Dim)
			}
			if gr.DT != r.DT || (gr.P != nil) != (r.P != nil) {
				t.Errorf("%s %s: %s panels %v; the GGUF model's: %s panels %v", bn, name, r.DT, r.P != nil, gr.DT, gr.P != nil)
			}
			if bn == "ref" {
				for i := range r.F {
					if want := quant.BF16ToF32(binary.LittleEndian.Uint16(raw[2*i:])); r.F[i] != want {
						t.Fatalf("%s[%d] = %g, file %g", name, i, r.F[i], want)
					}
				}
			}
		}
		hf.Close()
		g.Close()
		be.Close()
	}
}
