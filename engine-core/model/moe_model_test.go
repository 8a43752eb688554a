package model

import (
	"bytes"
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
	"github.com/sluice-llm/sluice/modelfile/gguf"
	"github.com/sluice-llm/sluice/modelfile/safetensors"
	"github.com/sluice-llm/sluice/quant"
)

// moeModel is a random mixture-of-experts model held in float64 under
// logical names (Hugging Face's for the dense parts; per expert
// "model.layers.L.mlp.experts.E.{gate,up,down}_proj.{weight,bias}"), with
// writers for each family's safetensors and GGUF layouts and a naive
// float64 forward pass written from the reference implementations.
type moeModel struct {
	family string // "gpt_oss" or "qwen3_moe"
	cfg    map[string]any
	w      map[string][]float64
	dim    map[string][2]int
	// mx holds the ggml-layout MXFP4 bytes of gpt-oss's expert matrices
	// (w holds their exact decoded values).
	mx map[string][]byte
	// expertLayout, when set, is the layout TestMoELoadErrors writes
	// gpt-oss's experts in (writeHFExperts)
	expertLayout string

	dimModel, hidden, expHidden, layers, heads, kvHeads, hd, vocab, experts, topK, window int
	denseLayer                                                                            map[int]bool
}

// randomMoE makes a small random model of the family.
func randomMoE(family string, dense []int, seed uint64) *moeModel {
	return randomMoEShape(family, dense, seed, 5, 32)
}

// randomMoEShape is randomMoE with the given expert count and width.
func randomMoEShape(family string, dense []int, seed uint64, experts, expHidden int) *moeModel {
	r := rand.New(rand.NewPCG(seed, 7))
	m := &moeModel{family: family, w: map[string][]float64{}, dim: map[string][2]int{}, mx: map[string][]byte{},
		dimModel: 64, hidden: 80, expHidden: expHidden, layers: 3, heads: 4, kvHeads: 2, hd: 16, vocab: 97, experts: experts, topK: 2, window: 5,
		denseLayer: map[int]bool{}}
	for _, l := range dense {
		m.denseLayer[l] = true
	}
	cfg := map[string]any{
		"hidden_size": float64(m.dimModel), "num_hidden_layers": float64(m.layers),
		"num_attention_heads": float64(m.heads), "num_key_value_heads": float64(m.kvHeads), "head_dim": float64(m.hd),
		"rms_norm_eps": 1e-5, "max_position_embeddings": 256.0, "vocab_size": float64(m.vocab),
		"tie_word_embeddings": false, "eos_token_id": 2.0, "bos_token_id": 1.0, "num_experts_per_tok": float64(m.topK),
	}
	if family == "gpt_oss" {
		m.hidden = m.expHidden
		cfg["architectures"] = []any{"GptOssForCausalLM"}
		cfg["intermediate_size"] = float64(m.expHidden)
		cfg["num_local_experts"] = float64(m.experts)
		cfg["rope_theta"] = 150000.0
		cfg["sliding_window"] = float64(m.window)
		var lt []any
		for l := 0; l < m.layers; l++ {
			lt = append(lt, map[bool]string{true: "sliding_attention", false: "full_attention"}[l%2 == 0])
		}
		cfg["layer_types"] = lt
		cfg["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 16.0,
			"beta_fast": 32.0, "beta_slow": 1.0, "truncate": false}
		cfg["swiglu_limit"] = 7.0
		cfg["attention_bias"] = true
	} else {
		cfg["architectures"] = []any{"Qwen3MoeForCausalLM"}
		cfg["intermediate_size"] = float64(m.hidden)
		cfg["moe_intermediate_size"] = float64(m.expHidden)
		cfg["num_experts"] = float64(m.experts)
		cfg["norm_topk_prob"] = true
		cfg["rope_theta"] = 50000.0
		ml := []any{}
		for _, l := range dense {
			ml = append(ml, float64(l))
		}
		cfg["mlp_only_layers"] = ml
	}
	m.cfg = cfg
	add := func(name string, rows, cols int, kind string) {
		d := make([]float64, rows*cols)
		for i := range d {
			switch kind {
			case "norm":
				d[i] = 1 + 0.2*r.NormFloat64()
			case "sink":
				d[i] = 1.5 * r.NormFloat64()
			default:
				d[i] = 0.15 * r.NormFloat64()
			}
		}
		if kind == "mxfp4" {
			f := make([]float32, len(d))
			for i, v := range d {
				f[i] = float32(v)
			}
			q := quant.QuantizeMXFP4(f)
			quant.DequantizeMXFP4(f, q)
			for i, v := range f {
				d[i] = float64(v)
			}
			m.mx[name] = q
		}
		m.w[name] = d
		m.dim[name] = [2]int{rows, cols}
	}
	D, H, EH := m.dimModel, m.hidden, m.expHidden
	qd, kd := m.heads*m.hd, m.kvHeads*m.hd
	add("model.embed_tokens.weight", m.vocab, D, "")
	add("lm_head.weight", m.vocab, D, "")
	add("model.norm.weight", 1, D, "norm")
	gpt := family == "gpt_oss"
	for l := 0; l < m.layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", 1, D, "norm")
		add(p+"post_attention_layernorm.weight", 1, D, "norm")
		add(p+"self_attn.q_proj.weight", qd, D, "")
		add(p+"self_attn.k_proj.weight", kd, D, "")
		add(p+"self_attn.v_proj.weight", kd, D, "")
		add(p+"self_attn.o_proj.weight", D, qd, "")
		if gpt {
			add(p+"self_attn.q_proj.bias", 1, qd, "")
			add(p+"self_attn.k_proj.bias", 1, kd, "")
			add(p+"self_attn.v_proj.bias", 1, kd, "")
			add(p+"self_attn.o_proj.bias", 1, D, "")
			add(p+"self_attn.sinks", 1, m.heads, "sink")
			add(p+"mlp.router.weight", m.experts, D, "")
			add(p+"mlp.router.bias", 1, m.experts, "")
		} else {
			add(p+"self_attn.q_norm.weight", 1, m.hd, "norm")
			add(p+"self_attn.k_norm.weight", 1, m.hd, "norm")
			if m.denseLayer[l] {
				add(p+"mlp.gate_proj.weight", H, D, "")
				add(p+"mlp.up_proj.weight", H, D, "")
				add(p+"mlp.down_proj.weight", D, H, "")
				continue
			}
			add(p+"mlp.gate.weight", m.experts, D, "")
		}
		kind := ""
		if gpt {
			kind = "mxfp4"
		}
		for e := 0; e < m.experts; e++ {
			pe := fmt.Sprintf("%smlp.experts.%d.", p, e)
			add(pe+"gate_proj.weight", EH, D, kind)
			add(pe+"up_proj.weight", EH, D, kind)
			add(pe+"down_proj.weight", D, EH, kind)
			if gpt {
				add(pe+"gate_proj.bias", 1, EH, "")
				add(pe+"up_proj.bias", 1, EH, "")
				add(pe+"down_proj.bias", 1, D, "")
			}
		}
	}
	return m
}

func f32s(d []float64) []float32 {
	f := make([]float32, len(d))
	for i, v := range d {
		f[i] = float32(v)
	}
	return f
}

// toSplit turns ggml-layout MXFP4 bytes into gpt-oss's blocks and scales.
func toSplit(q []byte) (blocks, scales []byte) {
	for b := 0; b < len(q)/quant.MXFP4BlockBytes; b++ {
		blk := q[b*quant.MXFP4BlockBytes : (b+1)*quant.MXFP4BlockBytes]
		scales = append(scales, blk[0])
		var vals [32]byte
		for j := 0; j < 16; j++ {
			vals[j], vals[16+j] = blk[1+j]&0xF, blk[1+j]>>4
		}
		for j := 0; j < 16; j++ {
			blocks = append(blocks, vals[2*j]|vals[2*j+1]<<4)
		}
	}
	return blocks, scales
}

// writeHF saves the model as config.json + model.safetensors in the
// family's Hugging Face layout (F32 except gpt-oss's MXFP4 experts).
func (m *moeModel) writeHF(t *testing.T) string {
	t.Helper()
	return m.writeHFExperts(t, "MXFP4")
}

// writeHFExperts is writeHF with gpt-oss's experts in the given layout:
// "MXFP4" (split blocks and scales) or a dense dtype ("BF16", "F32") in
// transformers' input-major gate_up_proj [experts × dim × 2·hidden] and
// down_proj [experts × hidden × dim]. MXFP4 values are exact in BF16.
func (m *moeModel) writeHFExperts(t *testing.T, layout string) string {
	t.Helper()
	dir := t.TempDir()
	cb, _ := json.Marshal(m.cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cb, 0o644); err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for name, d := range m.w {
		if m.family == "gpt_oss" && strings.Contains(name, ".mlp.experts.") {
			continue
		}
		sh := m.dim[name]
		shape := []int{sh[0], sh[1]}
		if sh[0] == 1 {
			shape = []int{sh[1]}
		}
		ts = append(ts, safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: safetensors.F32Bytes(f32s(d))})
	}
	if m.family == "gpt_oss" {
		D, EH, E := m.dimModel, m.expHidden, m.experts
		for l := 0; l < m.layers; l++ {
			p := fmt.Sprintf("model.layers.%d.mlp.experts.", l)
			var guB, guS, dnB, dnS []byte
			var guBias, dnBias []float32
			rb := quant.MXFP4RowBytes(D)
			for e := 0; e < E; e++ {
				pe := fmt.Sprintf("%s%d.", p, e)
				g, u := m.mx[pe+"gate_proj.weight"], m.mx[pe+"up_proj.weight"]
				for i := 0; i < EH; i++ { // interleave gate and up rows
					for _, row := range [][]byte{g[i*rb : (i+1)*rb], u[i*rb : (i+1)*rb]} {
						b, s := toSplit(row)
						guB, guS = append(guB, b...), append(guS, s...)
					}
					guBias = append(guBias, float32(m.w[pe+"gate_proj.bias"][i]), float32(m.w[pe+"up_proj.bias"][i]))
				}
				b, s := toSplit(m.mx[pe+"down_proj.weight"])
				dnB, dnS = append(dnB, b...), append(dnS, s...)
				dnBias = append(dnBias, f32s(m.w[pe+"down_proj.bias"])...)
			}
			ts = append(ts,
				safetensors.Tensor{Name: p + "gate_up_proj_bias", DType: "F32", Shape: []int{E, 2 * EH}, Data: safetensors.F32Bytes(guBias)},
				safetensors.Tensor{Name: p + "down_proj_bias", DType: "F32", Shape: []int{E, D}, Data: safetensors.F32Bytes(dnBias)})
			if layout == "MXFP4" {
				ts = append(ts,
					safetensors.Tensor{Name: p + "gate_up_proj_blocks", DType: "U8", Shape: []int{E, 2 * EH, D / 32, 16}, Data: guB},
					safetensors.Tensor{Name: p + "gate_up_proj_scales", DType: "U8", Shape: []int{E, 2 * EH, D / 32}, Data: guS},
					safetensors.Tensor{Name: p + "down_proj_blocks", DType: "U8", Shape: []int{E, D, EH / 32, 16}, Data: dnB},
					safetensors.Tensor{Name: p + "down_proj_scales", DType: "U8", Shape: []int{E, D, EH / 32}, Data: dnS})
				continue
			}
			// dense: gu[e][k][2i] = gate[i][k], gu[e][k][2i+1] = up[i][k],
			// dn[e][h][d] = down[d][h]
			gu, dn := make([]float32, E*D*2*EH), make([]float32, E*EH*D)
			for e := 0; e < E; e++ {
				pe := fmt.Sprintf("%s%d.", p, e)
				g, u, dw := m.w[pe+"gate_proj.weight"], m.w[pe+"up_proj.weight"], m.w[pe+"down_proj.weight"]
				for i := 0; i < EH; i++ {
					for k := 0; k < D; k++ {
						gu[(e*D+k)*2*EH+2*i] = float32(g[i*D+k])
						gu[(e*D+k)*2*EH+2*i+1] = float32(u[i*D+k])
						dn[(e*EH+i)*D+k] = float32(dw[k*EH+i])
					}
				}
			}
			enc := safetensors.F32Bytes
			if layout == "BF16" {
				enc = safetensors.BF16Bytes
			}
			ts = append(ts,
				safetensors.Tensor{Name: p + "gate_up_proj", DType: layout, Shape: []int{E, D, 2 * EH}, Data: enc(gu)},
				safetensors.Tensor{Name: p + "down_proj", DType: layout, Shape: []int{E, EH, D}, Data: enc(dn)})
		}
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ts, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeGGUF saves the model with llama.cpp's names and metadata for
// gpt-oss / qwen3moe: experts stacked into 3-D tensors (MXFP4 for gpt-oss,
// BF16 for Qwen3-MoE, whose values are rounded to BF16 in m first).
func (m *moeModel) writeGGUF(t *testing.T) string {
	t.Helper()
	return m.writeGGUFDir(t.TempDir())
}

// writeGGUFDir is writeGGUF into dir; it panics on a write error (test
// data only).
func (m *moeModel) writeGGUFDir(dir string) string {
	arch := map[string]string{"gpt_oss": "gpt-oss", "qwen3_moe": "qwen3moe"}[m.family]
	gpt := m.family == "gpt_oss"
	meta := []gguf.KV{
		{Key: "general.architecture", Value: arch},
		{Key: "general.name", Value: "tiny-" + arch},
		{Key: arch + ".context_length", Value: uint32(256)},
		{Key: arch + ".embedding_length", Value: uint32(m.dimModel)},
		{Key: arch + ".block_count", Value: uint32(m.layers)},
		{Key: arch + ".feed_forward_length", Value: uint32(m.hidden)},
		{Key: arch + ".attention.head_count", Value: uint32(m.heads)},
		{Key: arch + ".attention.head_count_kv", Value: uint32(m.kvHeads)},
		{Key: arch + ".attention.key_length", Value: uint32(m.hd)},
		{Key: arch + ".attention.layer_norm_rms_epsilon", Value: float32(1e-5)},
		{Key: arch + ".rope.freq_base", Value: float32(m.cfg["rope_theta"].(float64))},
		{Key: arch + ".expert_count", Value: uint32(m.experts)},
		{Key: arch + ".expert_used_count", Value: uint32(m.topK)},
		{Key: arch + ".expert_feed_forward_length", Value: uint32(m.expHidden)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(2)},
	}
	if gpt {
		meta = append(meta,
			gguf.KV{Key: arch + ".attention.sliding_window", Value: uint32(m.window)},
			gguf.KV{Key: arch + ".rope.scaling.type", Value: "yarn"},
			gguf.KV{Key: arch + ".rope.scaling.factor", Value: float32(8)},
			gguf.KV{Key: arch + ".rope.scaling.original_context_length", Value: uint32(16)})
	}
	var ts []gguf.Tensor
	put := func(name string, dims []uint64, typ gguf.GGMLType, data []byte) {
		ts = append(ts, gguf.Tensor{Name: name, Dims: dims, Type: typ, Data: data})
	}
	dense := func(name, gname string) {
		d := m.w[name]
		sh := m.dim[name]
		dims := []uint64{uint64(sh[1])}
		if sh[0] > 1 {
			dims = append(dims, uint64(sh[0]))
		}
		put(gname, dims, gguf.TypeF32, gguf.EncodeF32(f32s(d)))
	}
	dense("model.embed_tokens.weight", "token_embd.weight")
	dense("lm_head.weight", "output.weight")
	dense("model.norm.weight", "output_norm.weight")
	for l := 0; l < m.layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		b := fmt.Sprintf("blk.%d.", l)
		names := map[string]string{
			"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
			"self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
		}
		if gpt {
			names["post_attention_layernorm.weight"] = "post_attention_norm.weight"
			names["self_attn.sinks"] = "attn_sinks.weight"
			names["mlp.router.weight"] = "ffn_gate_inp.weight"
			names["mlp.router.bias"] = "ffn_gate_inp.bias"
			for _, x := range []string{"q", "k", "v"} {
				names["self_attn."+x+"_proj.bias"] = "attn_" + x + ".bias"
			}
			names["self_attn.o_proj.bias"] = "attn_output.bias"
		} else {
			names["post_attention_layernorm.weight"] = "ffn_norm.weight"
			names["self_attn.q_norm.weight"] = "attn_q_norm.weight"
			names["self_attn.k_norm.weight"] = "attn_k_norm.weight"
			names["mlp.gate.weight"] = "ffn_gate_inp.weight"
		}
		for hf, gg := range names {
			dense(p+hf, b+gg)
		}
		for _, part := range []struct {
			hf, gg     string
			rows, cols int
		}{{"gate_proj", "ffn_gate_exps", m.expHidden, m.dimModel}, {"up_proj", "ffn_up_exps", m.expHidden, m.dimModel}, {"down_proj", "ffn_down_exps", m.dimModel, m.expHidden}} {
			var data, bias []byte
			for e := 0; e < m.experts; e++ {
				name := fmt.Sprintf("%smlp.experts.%d.%s.weight", p, e, part.hf)
				if gpt {
					data = append(data, m.mx[name]...)
					bias = append(bias, gguf.EncodeF32(f32s(m.w[strings.TrimSuffix(name, "weight")+"bias"]))...)
					continue
				}
				d := m.w[name]
				bf := safetensors.BF16Bytes(f32s(d))
				for i := range d {
					d[i] = float64(quant.BF16ToF32(uint16(bf[2*i]) | uint16(bf[2*i+1])<<8))
				}
				data = append(data, bf...)
			}
			dims := []uint64{uint64(part.cols), uint64(part.rows), uint64(m.experts)}
			if gpt {
				put(b+part.gg+".weight", dims, gguf.TypeMXFP4, data)
				put(b+part.gg+".bias", []uint64{uint64(part.rows), uint64(m.experts)}, gguf.TypeF32, bias)
			} else {
				put(b+part.gg+".weight", dims, gguf.TypeBF16, data)
			}
		}
	}
	path := filepath.Join(dir, "tiny.gguf")
	var buf bytes.Buffer
	if err := gguf.Write(&buf, meta, ts); err != nil {
		panic(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		panic(err)
	}
	return path
}

// naiveLogits is a float64 forward pass written from transformers'
// GptOssForCausalLM / Qwen3MoeForCausalLM (and gpt-oss's reference
// sdpa): every position's logits, attention recomputed from scratch.
func (m *moeModel) naiveLogits(toks []int32) [][]float64 {
	D, hd := m.dimModel, m.hd
	gpt := m.family == "gpt_oss"
	eps := 1e-5
	theta := m.cfg["rope_theta"].(float64)
	inv := make([]float64, hd/2)
	mscale := 1.0
	for j := range inv {
		inv[j] = 1 / math.Pow(theta, float64(2*j)/float64(hd))
	}
	if gpt {
		// transformers' _compute_yarn_parameters, truncate=false
		factor, orig, betaFast, betaSlow := 8.0, 16.0, 32.0, 1.0
		corr := func(rot float64) float64 {
			return float64(hd) * math.Log(orig/(rot*2*math.Pi)) / (2 * math.Log(theta))
		}
		low, high := math.Max(corr(betaFast), 0), math.Min(corr(betaSlow), float64(hd-1))
		for j := range inv {
			pf := math.Pow(theta, float64(2*j)/float64(hd))
			ramp := math.Min(math.Max((float64(j)-low)/(high-low), 0), 1)
			extrap := 1 - ramp
			inv[j] = 1/(factor*pf)*(1-extrap) + 1/pf*extrap
		}
		mscale = 0.1*math.Log(factor) + 1
	}
	linear := func(x []float64, name string) []float64 {
		w, d := m.w[name], m.dim[name]
		out := make([]float64, d[0])
		for o := range out {
			for i, v := range x {
				out[o] += v * w[o*d[1]+i]
			}
		}
		if b, ok := m.w[strings.TrimSuffix(name, "weight")+"bias"]; ok {
			for o := range out {
				out[o] += b[o]
			}
		}
		return out
	}
	rms := func(x, w []float64) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		s := 1 / math.Sqrt(ss/float64(len(x))+eps)
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = v * s * w[i]
		}
		return out
	}
	rope := func(x []float64, pos int) {
		for j := 0; j < hd/2; j++ {
			s, c := math.Sincos(float64(pos) * inv[j])
			s, c = s*mscale, c*mscale
			a, b := x[j], x[j+hd/2]
			x[j], x[j+hd/2] = a*c-b*s, a*s+b*c
		}
	}
	n := len(toks)
	xs := make([][]float64, n)
	for i, t := range toks {
		xs[i] = append([]float64(nil), m.w["model.embed_tokens.weight"][int(t)*D:(int(t)+1)*D]...)
	}
	for l := 0; l < m.layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		qs, ks, vs := make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for i := range xs {
			xn := rms(xs[i], m.w[p+"input_layernorm.weight"])
			qs[i], ks[i], vs[i] = linear(xn, p+"self_attn.q_proj.weight"), linear(xn, p+"self_attn.k_proj.weight"), linear(xn, p+"self_attn.v_proj.weight")
			for h := 0; h < m.heads; h++ {
				q := qs[i][h*hd : (h+1)*hd]
				if qn, ok := m.w[p+"self_attn.q_norm.weight"]; ok {
					copy(q, rms(q, qn))
				}
				rope(q, i)
			}
			for h := 0; h < m.kvHeads; h++ {
				k := ks[i][h*hd : (h+1)*hd]
				if kn, ok := m.w[p+"self_attn.k_norm.weight"]; ok {
					copy(k, rms(k, kn))
				}
				rope(k, i)
			}
		}
		for i := range xs {
			first := 0
			if gpt && l%2 == 0 {
				first = max(0, i-m.window+1)
			}
			att := make([]float64, m.heads*hd)
			for h := 0; h < m.heads; h++ {
				kh := h / (m.heads / m.kvHeads)
				sink := math.Inf(-1)
				if gpt {
					sink = m.w[p+"self_attn.sinks"][h]
				}
				sc := make([]float64, i+1)
				mx := sink
				for j := first; j <= i; j++ {
					for d := 0; d < hd; d++ {
						sc[j] += qs[i][h*hd+d] * ks[j][kh*hd+d]
					}
					sc[j] /= math.Sqrt(float64(hd))
					mx = math.Max(mx, sc[j])
				}
				sum := math.Exp(sink - mx)
				for j := first; j <= i; j++ {
					sum += math.Exp(sc[j] - mx)
				}
				for j := first; j <= i; j++ {
					for d := 0; d < hd; d++ {
						att[h*hd+d] += math.Exp(sc[j]-mx) / sum * vs[j][kh*hd+d]
					}
				}
			}
			o := linear(att, p+"self_attn.o_proj.weight")
			for d := range o {
				xs[i][d] += o[d]
			}
			xn := rms(xs[i], m.w[p+"post_attention_layernorm.weight"])
			if m.denseLayer[l] {
				g, u := linear(xn, p+"mlp.gate_proj.weight"), linear(xn, p+"mlp.up_proj.weight")
				for d := range g {
					g[d] = g[d] / (1 + math.Exp(-g[d])) * u[d]
				}
				for d, v := range linear(g, p+"mlp.down_proj.weight") {
					xs[i][d] += v
				}
				continue
			}
			var logits []float64
			if gpt {
				logits = linear(xn, p+"mlp.router.weight")
			} else {
				logits = softmax64(linear(xn, p+"mlp.gate.weight"))
			}
			// top-k by value, lower index first among equals
			chosen := make([]int, 0, m.topK)
			for len(chosen) < m.topK {
				best := -1
				for e, v := range logits {
					taken := false
					for _, c := range chosen {
						taken = taken || c == e
					}
					if !taken && (best < 0 || v > logits[best]) {
						best = e
					}
				}
				chosen = append(chosen, best)
			}
			wts := make([]float64, m.topK)
			for k, e := range chosen {
				wts[k] = logits[e]
			}
			if gpt {
				wts = softmax64(wts)
			} else {
				var s float64
				for _, v := range wts {
					s += v
				}
				for k := range wts {
					wts[k] /= s
				}
			}
			for k, e := range chosen {
				pe := fmt.Sprintf("%smlp.experts.%d.", p, e)
				g, u := linear(xn, pe+"gate_proj.weight"), linear(xn, pe+"up_proj.weight")
				for d := range g {
					if gpt {
						gg, uu := math.Min(g[d], 7), math.Max(math.Min(u[d], 7), -7)
						g[d] = gg / (1 + math.Exp(-1.702*gg)) * (uu + 1)
					} else {
						g[d] = g[d] / (1 + math.Exp(-g[d])) * u[d]
					}
				}
				for d, v := range linear(g, pe+"down_proj.weight") {
					xs[i][d] += wts[k] * v
				}
			}
		}
	}
	out := make([][]float64, n)
	for i := range xs {
		out[i] = linear(rms(xs[i], m.w["model.norm.weight"]), "lm_head.weight")
	}
	return out
}

// TestMoEModelAgainstNaive loads small random gpt-oss- and Qwen3-MoE-
// shaped models from safetensors and GGUF and checks every position's
// logits (chunked prefill, then decode, over a paged cache longer than the
// sliding window) against the float64 naive forward, on the ref and cpu
// backends; gpt-oss also over a split KV cache whose window layers give
// back the blocks before their window (allLogitsSplit).
func TestMoEModelAgainstNaive(t *testing.T) {
	cases := []struct {
		name, family, format string
		dense                []int
	}{
		{"gpt-oss-safetensors-mxfp4", "gpt_oss", "hf", nil},
		{"gpt-oss-safetensors-bf16", "gpt_oss", "hf-BF16", nil},
		{"gpt-oss-safetensors-f32", "gpt_oss", "hf-F32", nil},
		{"gpt-oss-gguf-mxfp4", "gpt_oss", "gguf", nil},
		{"qwen3-moe-safetensors-dense-layer", "qwen3_moe", "hf", []int{1}},
		{"qwen3-moe-gguf-bf16", "qwen3_moe", "gguf", nil},
	}
	r := rand.New(rand.NewPCG(8, 8))
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mm := randomMoE(c.family, c.dense, uint64(ci+1))
			var path string
			if c.format == "hf" {
				path = mm.writeHF(t)
			} else if layout, ok := strings.CutPrefix(c.format, "hf-"); ok {
				path = mm.writeHFExperts(t, layout)
			} else {
				path = mm.writeGGUF(t)
			}
			toks := make([]int32, 30)
			for i := range toks {
				toks[i] = int32(r.IntN(mm.vocab))
			}
			want := mm.naiveLogits(toks)
			for _, bn := range []string{"cpu", "ref"} {
				var be kernels.Backend = kernels.NewRef()
				if bn == "cpu" {
					be = cpu.New(cpu.Options{Threads: 2})
				}
				m, err := Load(path, be, LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if m.Cfg.MoE == nil || m.Cfg.MoE.Family != c.family {
					t.Fatalf("loaded %+v, want family %s", m.Cfg.MoE, c.family)
				}
				got := allLogits(t, m, toks, []int{11, 1, 1, 7, 10})
				// a first chunk of more than moeFusedTokens tokens takes
				// the per-expert loop, the rest moeFFNFused
				long := allLogits(t, m, toks, []int{moeFusedTokens + 4, 1, 9})
				// the same over a split cache (window layers' blocks given
				// back), gpt-oss only
				split := allLogitsSplit(t, m, toks, []int{11, 1, 1, 7, 10})
				m.Close()
				be.Close()
				for name, got := range map[string][][]float32{"": got, " long chunk": long, " split KV": split} {
					if got == nil {
						continue
					}
					var maxErr, maxAbs float64
					for i := range want {
						for j := range want[i] {
							maxErr = math.Max(maxErr, math.Abs(float64(got[i][j])-want[i][j]))
							maxAbs = math.Max(maxAbs, math.Abs(want[i][j]))
						}
					}
					if maxErr > 1e-4*math.Max(1, maxAbs) {
						t.Errorf("%s%s: max |fast - naive| = %g (max |logit| %g)", bn, name, maxErr, maxAbs)
					}
				}
			}
		})
	}
}

// TestGeneratedMoEFiles loads gen-model's tiny gpt-oss (MXFP4) and
// Qwen3-MoE (Q4_K_M, BF16) files, checks the configuration they declare,
// compares the cpu backend's logits with the ref backend's over a prefill
// longer than gpt-oss-tiny's window, and checks that a decode step
// allocates nothing.
func TestGeneratedMoEFiles(t *testing.T) {
	for _, c := range []struct{ shape, format, family string }{
		{"gpt-oss-tiny", demo.FormatGGUFMXFP4, "gpt_oss"},
		{"qwen3-moe-tiny", demo.FormatGGUFQ4KM, "qwen3_moe"},
		{"qwen3-moe-tiny", demo.FormatGGUFBF16, "qwen3_moe"},
	} {
		t.Run(c.shape+"-"+c.format, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			shape := demo.RealShapes[c.shape]
			shape.Vocab = 1024 // gpt-oss-tiny's 201088 costs a minute of tokenizer building
			if err := demo.GenerateShape(path, shape, 3, c.format); err != nil {
				t.Fatal(err)
			}
			toks := make([]int32, 20)
			for i := range toks {
				toks[i] = int32(i*7919) % 1000
			}
			// the CPU backend as tests make it and as the runner does
			// (activations quantized: the fast MXFP4 kernels)
			var logits [3][][]float32
			for bi, be := range []kernels.Backend{kernels.NewRef(), cpu.New(cpu.Options{Threads: 2}), cpu.New(cpu.Options{Threads: 2, QuantizeActivations: true})} {
				m, err := Load(path, be, LoadOptions{MaxPos: 256})
				if err != nil {
					t.Fatal(err)
				}
				a := m.Cfg.MoE
				s := demo.RealShapes[c.shape]
				if a == nil || a.Family != c.family || a.MoE.Experts != s.Experts || a.MoE.TopK != s.TopK || a.MoE.Hidden != s.ExpertHidden {
					t.Fatalf("config %+v", a)
				}
				if c.family == "gpt_oss" && (!a.SlidingLayer[0] || a.SlidingLayer[1] || a.SlidingWindow != s.SlidingWindow || a.YaRN == nil || !a.Sinks) {
					t.Fatalf("gpt-oss attention config %+v", a)
				}
				logits[bi] = allLogits(t, m, toks, []int{13, 1, 1, 5})
				if bi >= 1 {
					checkDecodeAllocs(t, m)
					checkBatchDecodeAllocs(t, m, 16)
				}
				m.Close()
				be.Close()
			}
			// Per position, the largest difference. The CPU backend
			// quantizes activations for k-quant (and fast MXFP4) weights as
			// ggml does (about 1% here), and where two experts' router
			// logits nearly tie that can route a token to another expert:
			// such files must agree closely at 90% of positions; BF16
			// files (exact activations) everywhere.
			for bi, name := range []string{"cpu", "cpu-q8act"} {
				checkLogitsClose(t, name, logits[0], logits[bi+1], c.format == demo.FormatGGUFBF16)
			}
		})
	}
}

// checkLogitsClose compares a backend's logits at every position with the
// reference backend's: the largest difference per position. The CPU
// backend quantizes activations for k-quant (and fast MXFP4) weights as
// ggml does (about 1% here), and where two experts' router logits nearly
// tie that can route a token to another expert: such files must agree
// closely at 90% of positions; BF16 files (exact activations, unless
// quantized ones were asked for) everywhere.
func checkLogitsClose(t *testing.T, name string, want, got [][]float32, exact bool) {
	t.Helper()
	var maxAbs float64
	errs := make([]float64, len(want))
	for i := range want {
		for j, w := range want[i] {
			if math.IsNaN(float64(got[i][j])) {
				t.Fatalf("%s logit [%d][%d] is NaN", name, i, j)
			}
			errs[i] = math.Max(errs[i], math.Abs(float64(got[i][j]-w)))
			maxAbs = math.Max(maxAbs, math.Abs(float64(w)))
		}
	}
	tol, need := 1e-3*math.Max(1, maxAbs), len(errs)
	if !exact {
		tol, need = 0.03*maxAbs, len(errs)*9/10
	}
	close := 0
	for _, e := range errs {
		if e <= tol {
			close++
		}
	}
	if maxAbs == 0 || close < need {
		t.Errorf("%s vs ref: %d of %d positions within %g (per-position max diffs %v; max |logit| %g)", name, close, len(errs), tol, errs, maxAbs)
	}
}

// checkBatchDecodeAllocs runs one-token decode steps of nseq sequences
// at once (each expert gets a few of the rows: the MXFP4 tiles with scale
// tables) and fails if a step allocates.
func checkBatchDecodeAllocs(t *testing.T, m *Model, nseq int) {
	t.Helper()
	const bs, nb = 16, 2
	kv := m.NewKVCache(nseq*nb, bs)
	s := m.NewScratch(nseq, nseq)
	b := &Batch{Attn: kernels.AttnBatch{BlockSize: bs, QStart: []int32{0}, TableStart: []int32{0}}}
	for q := 0; q < nseq; q++ {
		b.Tokens = append(b.Tokens, int32(q+1))
		b.Pos = append(b.Pos, 0)
		b.OutRows = append(b.OutRows, int32(q))
		for i := 0; i < nb; i++ {
			b.Attn.Tables = append(b.Attn.Tables, int32(q*nb+i))
		}
		b.Attn.TableStart = append(b.Attn.TableStart, int32((q+1)*nb))
		b.Attn.QStart = append(b.Attn.QStart, int32(q+1))
		b.Attn.CtxLen = append(b.Attn.CtxLen, 1)
		b.Attn.Slots = append(b.Attn.Slots, int32(q*nb*bs))
	}
	step := func() {
		if _, err := m.Forward(s, kv, b); err != nil {
			t.Fatal(err)
		}
		for q := 0; q < nseq; q++ {
			p := (b.Pos[q] + 1) % (nb * bs)
			b.Pos[q], b.Attn.CtxLen[q] = p, p+1
			b.Attn.Slots[q] = int32(q*nb*bs) + p
			b.Tokens[q] = (b.Tokens[q]*31 + 7) % 1000
		}
	}
	step()
	if n := testing.AllocsPerRun(10, step); n != 0 {
		t.Errorf("%d-sequence decode step allocates %v times", nseq, n)
	}
}

// checkDecodeAllocs runs one-token decode steps of m and fails if a step
// allocates.
func checkDecodeAllocs(t *testing.T, m *Model) {
	t.Helper()
	kv := m.NewKVCache(8, 16)
	s := m.NewScratch(4, 4)
	b := &Batch{Tokens: []int32{5}, Pos: []int32{0}, OutRows: []int32{0}}
	b.Attn = kernels.AttnBatch{QStart: []int32{0, 1}, CtxLen: []int32{1}, Tables: []int32{3, 1}, TableStart: []int32{0, 2}, BlockSize: 16, Slots: []int32{48}}
	step := func() {
		if _, err := m.Forward(s, kv, b); err != nil {
			t.Fatal(err)
		}
		p := b.Pos[0] + 1
		b.Pos[0], b.Attn.CtxLen[0] = p, p+1
		b.Attn.Slots[0] = b.Attn.Tables[p/16]*16 + p%16
		b.Tokens[0] = (b.Tokens[0]*31 + 7) % 1000
	}
	step()
	if n := testing.AllocsPerRun(10, step); n != 0 {
		t.Errorf("decode step allocates %v times", n)
	}
}

// noExpertOps is a backend without kernels.ExpertOps.
type noExpertOps struct{ kernels.Backend }

// TestGptOssExpertsReleased loads gpt-oss safetensors files whose experts
// are most of the file (MXFP4 and BF16 layouts) and checks, from
// /proc/self/smaps, that after Load the file's mapping holds at most the
// bytes that are not expert tensors: the repacked copy is the only
// resident one.
func TestGptOssExpertsReleased(t *testing.T) {
	for _, layout := range []string{"MXFP4", "BF16"} {
		t.Run(layout, func(t *testing.T) {
			mm := randomMoEShape("gpt_oss", nil, 31, 32, 256)
			dir := mm.writeHFExperts(t, layout)
			path := filepath.Join(dir, "model.safetensors")
			st, err := safetensors.OpenModel(dir)
			if err != nil {
				t.Fatal(err)
			}
			var experts int64
			for _, n := range st.Names() {
				if ti, _ := st.Tensor(n); strings.Contains(n, ".mlp.experts.") && !strings.HasSuffix(n, "_bias") {
					experts += ti.End - ti.Begin
				}
			}
			st.Close()
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if experts < fi.Size()*3/4 {
				t.Fatalf("experts are %d of %d bytes: too few for the check", experts, fi.Size())
			}
			be := cpu.New(cpu.Options{Threads: 2})
			defer be.Close()
			m, err := Load(dir, be, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			rss := mappedRSS(t, path)
			// pages holding the ends of expert tensors (shared with other
			// tensors) may stay: one page each side of each tensor
			slack := int64(3 * 4 * 2 * os.Getpagesize())
			if rss > fi.Size()-experts+slack {
				t.Errorf("the file's mapping keeps %d bytes resident after Load; its non-expert tensors are %d bytes", rss, fi.Size()-experts)
			}
		})
	}
}

// mappedRSS returns the resident bytes of this process's mappings of the
// file at path, from /proc/self/smaps.
func mappedRSS(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("SKIP: no /proc/self/smaps (%v): resident pages cannot be read here", err)
	}
	var rss int64
	in := false
	for _, ln := range strings.Split(string(b), "\n") {
		if f := strings.Fields(ln); len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			in = f[len(f)-1] == path
			continue
		}
		if in && strings.HasPrefix(ln, "Rss:") {
			var kb int64
			fmt.Sscanf(strings.TrimPrefix(ln, "Rss:"), "%d", &kb)
			rss += kb << 10
		}
	}
	return rss
}

// TestMoELoadErrors checks that malformed mixture-of-experts files and a
// backend without expert ops fail to load with an error naming the
// problem.
func TestMoELoadErrors(t *testing.T) {
	cases := []struct {
		name   string
		family string
		gguf   bool
		edit   func(m *moeModel)
		be     func() kernels.Backend
		want   string
	}{
		{"missing sinks", "gpt_oss", false, func(m *moeModel) { delete(m.w, "model.layers.1.self_attn.sinks") }, nil, "model.layers.1.self_attn.sinks: missing"},
		{"missing expert", "qwen3_moe", false, func(m *moeModel) { delete(m.w, "model.layers.0.mlp.experts.3.up_proj.weight") }, nil, "model.layers.0.mlp.experts.3.up_proj.weight"},
		{"expert count", "qwen3_moe", true, func(m *moeModel) { m.cfg["num_experts"] = 6.0; m.experts = 4 }, nil, "mlp.gate.weight has shape [5 × 64], want [4 × 64]"},
		{"router shape", "gpt_oss", false, func(m *moeModel) {
			m.w["model.layers.0.mlp.router.weight"] = m.w["model.layers.0.mlp.router.weight"][:4*64]
			m.dim["model.layers.0.mlp.router.weight"] = [2]int{4, 64}
		}, nil, "mlp.router.weight has shape [4 × 64], want [5 × 64]"},
		{"no expert ops", "gpt_oss", true, nil, func() kernels.Backend { return noExpertOps{kernels.NewRef()} }, "no mixture-of-experts ops"},
		{"dense expert dtype", "gpt_oss", false, func(m *moeModel) { m.expertLayout = "I32" }, nil, "gate_up_proj: unsupported dtype I32 (want MXFP4 blocks, BF16, F16 or F32)"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := randomMoE(c.family, nil, uint64(i+20))
			if c.edit != nil {
				c.edit(m)
			}
			var path string
			switch {
			case c.gguf:
				path = m.writeGGUF(t)
			case m.expertLayout != "":
				path = m.writeHFExperts(t, m.expertLayout)
			default:
				path = m.writeHF(t)
			}
			be := kernels.Backend(kernels.NewRef())
			if c.be != nil {
				be = c.be()
			}
			_, err := Load(path, be, LoadOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// FuzzMoEGGUF loads mutated tiny gpt-oss and Qwen3-MoE GGUF files: Load
// must fail with an error or give a model whose forward pass runs, never
// panic.
func FuzzMoEGGUF(f *testing.F) {
	for i, fam := range []string{"gpt_oss", "qwen3_moe"} {
		m := randomMoE(fam, nil, uint64(i+40))
		m.layers, m.vocab = 2, 97
		data, err := os.ReadFile(m.writeGGUFDir(f.TempDir()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint32(len(data)/3), byte(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, at uint32, xor byte) {
		if len(data) == 0 {
			return
		}
		d := append([]byte(nil), data...)
		d[int(at)%len(d)] ^= xor
		path := filepath.Join(t.TempDir(), "m.gguf")
		if err := os.WriteFile(path, d, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Load(path, kernels.NewRef(), LoadOptions{MaxPos: 64})
		if err != nil {
			return
		}
		defer m.Close()
		if m.Cfg.Vocab > 1<<16 || m.Cfg.Dim > 1<<12 {
			return // a legal but large model: not worth running here
		}
		toks := []int32{1, 2, 3}
		for i := range toks {
			toks[i] %= int32(m.Cfg.Vocab)
		}
		kv := m.NewKVCache(4, 4)
		s := m.NewScratch(3, 3)
		b := &Batch{Tokens: toks, Pos: []int32{0, 1, 2}, OutRows: []int32{0, 1, 2},
			Attn: kernels.AttnBatch{QStart: []int32{0, 3}, CtxLen: []int32{3}, Tables: []int32{2}, TableStart: []int32{0, 1}, BlockSize: 4, Slots: []int32{8, 9, 10}}}
		if _, err := m.Forward(s, kv, b); err != nil {
			t.Fatalf("forward of a loaded model: %v", err)
		}
	})
}
