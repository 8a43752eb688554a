package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
	"github.com/sluice-llm/sluice/modelfile/safetensors"
	"github.com/sluice-llm/sluice/quant"
)

// hfModel is a model in Hugging Face naming held in float64, for the naive
// forward pass.
type hfModel struct {
	cfg map[string]any
	w   map[string][]float64
	dim map[string][2]int
}

func (h *hfModel) num(key string) int { return int(h.cfg[key].(float64)) }

// randomHF makes a random model of the given architecture switches.
func randomHF(arch string, tied, bias, qknorm, llama3 bool, seed uint64) *hfModel {
	r := rand.New(rand.NewPCG(seed, 99))
	dim, hidden, layers, heads, kvHeads, hd, vocab := 48, 80, 2, 6, 2, 16, 97
	if arch == "Qwen3ForCausalLM" {
		hd = 12 // head_dim independent of hidden_size / heads
	}
	cfg := map[string]any{
		"architectures": []any{arch}, "hidden_size": float64(dim), "intermediate_size": float64(hidden),
		"num_hidden_layers": float64(layers), "num_attention_heads": float64(heads), "num_key_value_heads": float64(kvHeads),
		"head_dim": float64(hd), "rms_norm_eps": 1e-5, "rope_theta": 50000.0, "max_position_embeddings": 256.0,
		"vocab_size": float64(vocab), "tie_word_embeddings": tied, "eos_token_id": 2.0, "bos_token_id": 1.0,
	}
	if llama3 {
		cfg["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 32.0}
	}
	h := &hfModel{cfg: cfg, w: map[string][]float64{}, dim: map[string][2]int{}}
	add := func(name string, rows, cols int, norm bool) {
		d := make([]float64, rows*cols)
		for i := range d {
			if norm {
				d[i] = 1 + 0.2*r.NormFloat64()
			} else {
				d[i] = 0.15 * r.NormFloat64()
			}
		}
		h.w[name] = d
		h.dim[name] = [2]int{rows, cols}
	}
	add("model.embed_tokens.weight", vocab, dim, false)
	for l := 0; l < layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", 1, dim, true)
		add(p+"self_attn.q_proj.weight", heads*hd, dim, false)
		add(p+"self_attn.k_proj.weight", kvHeads*hd, dim, false)
		add(p+"self_attn.v_proj.weight", kvHeads*hd, dim, false)
		add(p+"self_attn.o_proj.weight", dim, heads*hd, false)
		if bias {
			add(p+"self_attn.q_proj.bias", 1, heads*hd, false)
			add(p+"self_attn.k_proj.bias", 1, kvHeads*hd, false)
			add(p+"self_attn.v_proj.bias", 1, kvHeads*hd, false)
		}
		if qknorm {
			add(p+"self_attn.q_norm.weight", 1, hd, true)
			add(p+"self_attn.k_norm.weight", 1, hd, true)
		}
		add(p+"post_attention_layernorm.weight", 1, dim, true)
		add(p+"mlp.gate_proj.weight", hidden, dim, false)
		add(p+"mlp.up_proj.weight", hidden, dim, false)
		add(p+"mlp.down_proj.weight", dim, hidden, false)
	}
	add("model.norm.weight", 1, dim, true)
	if !tied {
		add("lm_head.weight", vocab, dim, false)
	}
	return h
}

// write saves the model as config.json + model.safetensors (dtype "F32" or
// "BF16"; BF16 values are rounded back into h so that both sides agree).
func (h *hfModel) write(t *testing.T, dtype string) string {
	t.Helper()
	dir := t.TempDir()
	cb, _ := json.Marshal(h.cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cb, 0o644); err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for name, d := range h.w {
		f := make([]float32, len(d))
		for i, v := range d {
			f[i] = float32(v)
		}
		sh := h.dim[name]
		shape := []int{sh[0], sh[1]}
		if sh[0] == 1 {
			shape = []int{sh[1]}
		}
		data := safetensors.F32Bytes(f)
		if dtype == "F16" {
			data = make([]byte, 2*len(f))
			for i, v := range f {
				hb := quant.F32ToF16(v)
				data[2*i], data[2*i+1] = byte(hb), byte(hb>>8)
				d[i] = float64(quant.F16ToF32(hb))
			}
		}
		if dtype == "BF16" {
			data = safetensors.BF16Bytes(f)
			for i := range d {
				d[i] = float64(quant.BF16ToF32(uint16(data[2*i]) | uint16(data[2*i+1])<<8))
			}
		}
		ts = append(ts, safetensors.Tensor{Name: name, DType: dtype, Shape: shape, Data: data})
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

// naiveLogits is a float64 forward pass written from the Hugging Face
// modeling code (rotate_half RoPE, full causal attention recomputed from
// scratch): the logits at every position of toks.
func (h *hfModel) naiveLogits(toks []int32) [][]float64 {
	dim, hidden, layers := h.num("hidden_size"), h.num("intermediate_size"), h.num("num_hidden_layers")
	heads, kvHeads, hd, vocab := h.num("num_attention_heads"), h.num("num_key_value_heads"), h.num("head_dim"), h.num("vocab_size")
	eps := h.cfg["rms_norm_eps"].(float64)
	theta := h.cfg["rope_theta"].(float64)
	inv := make([]float64, hd/2)
	for j := range inv {
		inv[j] = 1 / math.Pow(theta, float64(2*j)/float64(hd))
	}
	if rs, ok := h.cfg["rope_scaling"].(map[string]any); ok {
		factor, lf, hf, old := rs["factor"].(float64), rs["low_freq_factor"].(float64), rs["high_freq_factor"].(float64), rs["original_max_position_embeddings"].(float64)
		for j, f := range inv {
			wl := 2 * math.Pi / f
			if wl > old/lf {
				inv[j] = f / factor
			} else if wl >= old/hf {
				s := (old/wl - lf) / (hf - lf)
				inv[j] = (1-s)*f/factor + s*f
			}
		}
	}
	linear := func(x []float64, name string) []float64 {
		w, d := h.w[name], h.dim[name]
		out := make([]float64, d[0])
		for o := range out {
			for i, v := range x {
				out[o] += v * w[o*d[1]+i]
			}
		}
		if b, ok := h.w[name[:len(name)-len("weight")]+"bias"]; ok {
			for o := range out {
				out[o] += b[o]
			}
		}
		return out
	}
	rms := func(x []float64, w []float64) []float64 {
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
			a, b := x[j], x[j+hd/2]
			x[j], x[j+hd/2] = a*c-b*s, a*s+b*c
		}
	}
	n := len(toks)
	xs := make([][]float64, n)
	for i, t := range toks {
		xs[i] = append([]float64(nil), h.w["model.embed_tokens.weight"][int(t)*dim:(int(t)+1)*dim]...)
	}
	for l := 0; l < layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		qs, ks, vs := make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for i := range xs {
			xn := rms(xs[i], h.w[p+"input_layernorm.weight"])
			qs[i], ks[i], vs[i] = linear(xn, p+"self_attn.q_proj.weight"), linear(xn, p+"self_attn.k_proj.weight"), linear(xn, p+"self_attn.v_proj.weight")
			for hh := 0; hh < heads; hh++ {
				q := qs[i][hh*hd : (hh+1)*hd]
				if qn, ok := h.w[p+"self_attn.q_norm.weight"]; ok {
					copy(q, rms(q, qn))
				}
				rope(q, i)
			}
			for hh := 0; hh < kvHeads; hh++ {
				k := ks[i][hh*hd : (hh+1)*hd]
				if kn, ok := h.w[p+"self_attn.k_norm.weight"]; ok {
					copy(k, rms(k, kn))
				}
				rope(k, i)
			}
		}
		for i := range xs {
			att := make([]float64, heads*hd)
			for hh := 0; hh < heads; hh++ {
				kh := hh / (heads / kvHeads)
				sc := make([]float64, i+1)
				mx := math.Inf(-1)
				for j := 0; j <= i; j++ {
					for d := 0; d < hd; d++ {
						sc[j] += qs[i][hh*hd+d] * ks[j][kh*hd+d]
					}
					sc[j] /= math.Sqrt(float64(hd))
					mx = math.Max(mx, sc[j])
				}
				var sum float64
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for j := range sc {
					for d := 0; d < hd; d++ {
						att[hh*hd+d] += sc[j] / sum * vs[j][kh*hd+d]
					}
				}
			}
			o := linear(att, p+"self_attn.o_proj.weight")
			for d := range o {
				xs[i][d] += o[d]
			}
			xn := rms(xs[i], h.w[p+"post_attention_layernorm.weight"])
			g, u := linear(xn, p+"mlp.gate_proj.weight"), linear(xn, p+"mlp.up_proj.weight")
			for d := range g {
				g[d] = g[d] / (1 + math.Exp(-g[d])) * u[d]
			}
			dn := linear(g, p+"mlp.down_proj.weight")
			for d := range dn {
				xs[i][d] += dn[d]
			}
		}
		_ = hidden
	}
	head := "lm_head.weight"
	if _, ok := h.w[head]; !ok {
		head = "model.embed_tokens.weight"
	}
	out := make([][]float64, n)
	for i := range xs {
		xn := rms(xs[i], h.w["model.norm.weight"])
		out[i] = make([]float64, vocab)
		w := h.w[head]
		for o := 0; o < vocab; o++ {
			for d, v := range xn {
				out[i][o] += v * w[o*dim+d]
			}
		}
	}
	return out
}

// allLogits runs toks through m in chunks (prefill of the first chunk,
// then the rest split as given) and returns the logits at every position.
func allLogits(t *testing.T, m *Model, toks []int32, chunks []int) [][]float32 {
	t.Helper()
	const bs = 4
	nb := (len(toks) + bs - 1) / bs
	kv := m.NewKVCache(nb+3, bs)
	table := make([]int32, nb)
	for i := range table {
		table[i] = int32((i*5 + 2) % (nb + 3))
	}
	s := m.NewScratch(len(toks), len(toks))
	var out [][]float32
	start := 0
	for _, c := range chunks {
		b := &Batch{Tokens: toks[start : start+c]}
		for i := 0; i < c; i++ {
			p := int32(start + i)
			b.Pos = append(b.Pos, p)
			b.OutRows = append(b.OutRows, int32(i))
			b.Attn.Slots = append(b.Attn.Slots, table[p/bs]*bs+p%bs)
		}
		b.Attn.QStart = []int32{0, int32(c)}
		b.Attn.CtxLen = []int32{int32(start + c)}
		b.Attn.Tables, b.Attn.TableStart, b.Attn.BlockSize = table, []int32{0, int32(nb)}, bs
		lg, err := m.Forward(s, kv, b)
		if err != nil {
			t.Fatal(err)
		}
		v := m.Cfg.Vocab
		for i := 0; i < c; i++ {
			out = append(out, append([]float32(nil), lg[i*v:(i+1)*v]...))
		}
		start += c
	}
	return out
}

// TestNaiveAgreement checks the fast path (CPU backend, paged attention,
// chunked prefill then decode) against the float64 naive forward pass on
// random tiny models of each architecture variant.
func TestNaiveAgreement(t *testing.T) {
	cases := []struct {
		name                       string
		arch                       string
		tied, bias, qknorm, llama3 bool
		dtype                      string
	}{
		{"llama2-gqa", "LlamaForCausalLM", false, false, false, false, "F32"},
		{"llama3-scaling-tied", "LlamaForCausalLM", true, false, false, true, "F32"},
		{"mistral-bf16", "MistralForCausalLM", false, false, false, false, "BF16"},
		{"qwen2-bias-f16", "Qwen2ForCausalLM", true, true, false, false, "F16"},
		{"qwen3-qknorm", "Qwen3ForCausalLM", true, false, true, false, "F32"},
	}
	r := rand.New(rand.NewPCG(4, 4))
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := randomHF(c.arch, c.tied, c.bias, c.qknorm, c.llama3, uint64(ci))
			dir := h.write(t, c.dtype)
			toks := make([]int32, 40)
			for i := range toks {
				toks[i] = int32(r.IntN(97))
			}
			want := h.naiveLogits(toks)
			for name, be := range map[string]kernels.Backend{"cpu": cpu.New(cpu.Options{Threads: 2}), "ref": kernels.NewRef()} {
				m, err := Load(dir, be, LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				got := allLogits(t, m, toks, []int{17, 1, 1, 5, 16})
				m.Close()
				be.Close()
				var maxErr, maxAbs float64
				for i := range want {
					for j := range want[i] {
						maxErr = math.Max(maxErr, math.Abs(float64(got[i][j])-want[i][j]))
						maxAbs = math.Max(maxAbs, math.Abs(want[i][j]))
					}
				}
				if maxErr > 1e-4*math.Max(1, maxAbs) {
					t.Errorf("%s: max |fast - naive| = %g (max |logit| %g)", name, maxErr, maxAbs)
				}
			}
		})
	}
}

func TestUnsupportedArchitecture(t *testing.T) {
	h := randomHF("GPT2LMHeadModel", true, false, false, false, 1)
	dir := h.write(t, "F32")
	_, err := Load(dir, kernels.NewRef(), LoadOptions{})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("Qwen3ForCausalLM")) {
		t.Fatalf("want an error listing the supported architectures, got %v", err)
	}
}

func TestShapeMismatch(t *testing.T) {
	h := randomHF("LlamaForCausalLM", true, false, false, false, 1)
	h.cfg["intermediate_size"] = 81.0
	dir := h.write(t, "F32")
	_, err := Load(dir, kernels.NewRef(), LoadOptions{})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("mlp.gate_proj.weight has shape [80 × 48], want [81 × 48]")) {
		t.Fatalf("want a shape error naming the tensor, got %v", err)
	}
}
