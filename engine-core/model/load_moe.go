package model

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/modelfile/gguf"
	"github.com/sluice-llm/sluice/modelfile/hfconfig"
	"github.com/sluice-llm/sluice/modelfile/safetensors"
	"github.com/sluice-llm/sluice/quant"
)

// This file loads the mixture-of-experts families from both formats.
//
// Hugging Face: gpt-oss (GptOssForCausalLM) stores each layer's experts as
// mlp.experts.{gate_up,down}_proj_{blocks,scales,bias}, MXFP4 in the split
// layout with gate and up rows interleaved; they are repacked into ggml's
// MXFP4 layout (a copy; no re-encoding). Qwen3-MoE (Qwen3MoeForCausalLM)
// stores one 2-D tensor per expert (mlp.experts.E.{gate,up,down}_proj),
// used in place from the memory map.
//
// GGUF (llama.cpp's names): blk.N.ffn_{gate,up,down}_exps.weight are 3-D
// [experts × rows × cols] in their stored type (MXFP4 for gpt-oss, k-quants
// or BF16 for Qwen3-MoE); each expert's matrix is a view into the tensor's
// memory-mapped bytes. Routers are ffn_gate_inp, gpt-oss's sinks
// attn_sinks and its feed-forward norm post_attention_norm.

// moeFamilyHF returns "gpt_oss" or "qwen3_moe" for those architectures,
// "" otherwise.
func moeFamilyHF(archs []string, modelType string) string {
	for _, a := range archs {
		switch a {
		case "GptOssForCausalLM":
			return "gpt_oss"
		case "Qwen3MoeForCausalLM":
			return "qwen3_moe"
		}
	}
	if len(archs) == 0 && (modelType == "gpt_oss" || modelType == "qwen3_moe") {
		return modelType
	}
	return ""
}

// openHFMoE reads a gpt-oss or Qwen3-MoE Hugging Face directory's config.
func openHFMoE(dir string, hc *hfconfig.Config) (*Config, source, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, nil, fmt.Errorf("model: %w", err)
	}
	a, err := ParseMoEArch(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("model: %s: %w", dir, err)
	}
	c := &Config{
		Name: filepath.Base(filepath.Clean(dir)),
		Dim:  hc.HiddenSize, Hidden: hc.IntermediateSize, Layers: hc.NumHiddenLayers,
		Heads: hc.NumAttentionHeads, KVHeads: hc.NumKeyValueHeads, HeadDim: hc.HeadDim, Vocab: hc.VocabSize,
		NormEps: float32(hc.RMSNormEps), RopeTheta: hc.RopeTheta, RopeStyle: kernels.RoPEHalf,
		MaxPos: hc.MaxPositionEmbeddings, Tied: hc.TieWordEmbeddings,
		QKVBias: a.AttentionBias, OBias: a.AttentionBias, MoE: a, BOS: -1, EOS: hc.EOSTokenIDs,
	}
	if a.Family == "gpt_oss" {
		c.Arch = "gpt-oss"
	} else {
		c.Arch, c.QKNorm = "qwen3moe", true
	}
	if c.HeadDim == 0 && c.Heads > 0 {
		c.HeadDim = c.Dim / c.Heads
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.Hidden == 0 {
		c.Hidden = a.MoE.Hidden
	}
	if hc.BOSTokenID != nil {
		c.BOS = *hc.BOSTokenID
	}
	if c.MaxPos == 0 {
		c.MaxPos = 2048
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	st, err := safetensors.OpenModel(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("model: %w", err)
	}
	return c, &hfSource{m: st}, nil
}

// ggufMoEArch reads the expert block's metadata of a gpt-oss or qwen3moe
// GGUF file, completing c.
func ggufMoEArch(f *gguf.File, arch string, c *Config) (*MoEArch, error) {
	u := func(key string) int {
		v, _ := f.Meta.Uint(arch + "." + key)
		return int(v)
	}
	a := &MoEArch{SparseLayer: make([]bool, c.Layers), SlidingLayer: make([]bool, c.Layers)}
	for l := range a.SparseLayer {
		a.SparseLayer[l] = true // llama.cpp builds every layer of both as MoE
	}
	mc := MoEConfig{Dim: c.Dim, Hidden: u("expert_feed_forward_length"), Experts: u("expert_count"), TopK: u("expert_used_count")}
	switch arch {
	case "gpt-oss":
		a.Family = "gpt_oss"
		mc.Routing, mc.Act = RouteTopKSoftmax, ActClampedSwiGLU
		mc.Alpha, mc.Limit = GptOssSwiGLU()
		a.Sinks, a.AttentionBias = true, true
		// llama.cpp: every other layer slides, the first included.
		a.SlidingWindow = u("attention.sliding_window")
		for l := range a.SlidingLayer {
			a.SlidingLayer[l] = l%2 == 0
		}
	case "qwen3moe":
		a.Family = "qwen3_moe"
		// llama.cpp renormalises Qwen3-MoE's top-k weights (norm_topk_prob
		// is true in the released configs).
		mc.Routing, mc.NormTopK, mc.Act = RouteSoftmaxTopK, true, ActSwiGLU
	}
	a.MoE = mc
	if st, ok := f.Meta.String(arch + ".rope.scaling.type"); ok && st == "yarn" {
		y := &YaRN{OriginalMaxPos: u("rope.scaling.original_context_length")}
		y.Factor, _ = f.Meta.Float(arch + ".rope.scaling.factor")
		y.BetaFast, _ = f.Meta.Float(arch + ".rope.scaling.yarn_beta_fast")
		y.BetaSlow, _ = f.Meta.Float(arch + ".rope.scaling.yarn_beta_slow")
		if y.Factor <= 0 || y.OriginalMaxPos <= 0 {
			return nil, errors.New("yarn rope scaling needs rope.scaling.factor and rope.scaling.original_context_length")
		}
		a.YaRN = y // gpt-oss's config: truncate false
	}
	if c.Hidden == 0 {
		c.Hidden = mc.Hidden
	}
	if err := mc.validate(); err != nil {
		return nil, err
	}
	return a, nil
}

// loadMoELayer loads layer l's attention sinks and, for a sparse layer,
// its router and experts. get is build's loader of 2-D tensors.
func (m *Model) loadMoELayer(src source, l int, get func(name string, rows, cols int, optional bool) kernels.Tensor) error {
	c, a := &m.Cfg, m.Cfg.MoE
	L := &m.Layers[l]
	p := fmt.Sprintf("model.layers.%d.", l)
	if a.Sinks {
		t, ok, err := src.get(p + "self_attn.sinks")
		if err == nil && !ok {
			err = errMissing
		}
		if err == nil && (t.rows != 1 || t.cols != c.Heads) {
			err = fmt.Errorf("shape [%d × %d], want [%d]", t.rows, t.cols, c.Heads)
		}
		if err == nil {
			L.Sinks, err = decodeF32(t)
		}
		if err != nil {
			return fmt.Errorf("model: %s: %sself_attn.sinks: %w", src.path(), p, err)
		}
		m.weightBytes += int64(len(t.data))
	}
	if !a.SparseLayer[l] {
		return nil
	}
	mc := &a.MoE
	if a.Family == "gpt_oss" {
		L.Router = get(p+"mlp.router.weight", mc.Experts, c.Dim, false)
		L.RouterBias = get(p+"mlp.router.bias", 1, mc.Experts, false)
	} else {
		L.Router = get(p+"mlp.gate.weight", mc.Experts, c.Dim, false)
	}
	if L.Router == nil {
		return nil // get recorded the error
	}
	var err error
	switch s := src.(type) {
	case *hfSource:
		if a.Family == "gpt_oss" {
			L.Experts, err = m.hfGptOssExperts(s, l)
		} else {
			L.Experts, err = m.hfQwen3Experts(l, get)
		}
	default:
		L.Experts, err = m.stackedExperts(src, l)
	}
	return err
}

// decodeF32 returns a 1-D or 2-D tensor's values as float32 (a copy).
func decodeF32(t rawTensor) ([]float32, error) {
	dt, ok := storedTypes[t.enc]
	if !ok {
		return nil, fmt.Errorf("unsupported encoding %s", t.enc)
	}
	n := max(t.experts, 1) * t.rows * t.cols
	if len(t.data) != n/t.cols*dt.RowBytes(t.cols) {
		return nil, fmt.Errorf("%d bytes of %s for %d values", len(t.data), t.enc, n)
	}
	out := make([]float32, n)
	if dt == kernels.F32 {
		copy(out, kernels.BytesToF32(t.data))
		return out, nil
	}
	dequantizers[dt](out, t.data)
	return out, nil
}

// stackedExperts loads layer l's experts from 3-D tensors (GGUF's
// ffn_*_exps): each expert's matrix is a view of its rows of the mapped
// tensor, passed to the backend in the stored type.
func (m *Model) stackedExperts(src source, l int) ([]ExpertWeights, error) {
	c, mc := &m.Cfg, &m.Cfg.MoE.MoE
	out := make([]ExpertWeights, mc.Experts)
	for _, part := range []struct {
		name       string
		rows, cols int
		w, b       func(*ExpertWeights) *kernels.Tensor
	}{
		{"gate_proj", mc.Hidden, c.Dim, func(e *ExpertWeights) *kernels.Tensor { return &e.Gate }, func(e *ExpertWeights) *kernels.Tensor { return &e.GateBias }},
		{"up_proj", mc.Hidden, c.Dim, func(e *ExpertWeights) *kernels.Tensor { return &e.Up }, func(e *ExpertWeights) *kernels.Tensor { return &e.UpBias }},
		{"down_proj", c.Dim, mc.Hidden, func(e *ExpertWeights) *kernels.Tensor { return &e.Down }, func(e *ExpertWeights) *kernels.Tensor { return &e.DownBias }},
	} {
		name := fmt.Sprintf("model.layers.%d.mlp.experts.%s.weight", l, part.name)
		wrap := func(err error) error {
			return fmt.Errorf("model: %s: %s (want [%d × %d × %d]): %w", src.path(), ggufName(name), mc.Experts, part.rows, part.cols, err)
		}
		t, ok, err := src.get(name)
		if err == nil && !ok {
			err = errMissing
		}
		if err != nil {
			return nil, wrap(err)
		}
		if t.experts != mc.Experts || t.rows != part.rows || t.cols != part.cols {
			return nil, wrap(fmt.Errorf("shape [%d × %d × %d]", t.experts, t.rows, t.cols))
		}
		dt, ok := storedTypes[t.enc]
		if !ok {
			return nil, wrap(fmt.Errorf("unsupported encoding %s", t.enc))
		}
		if bv := blockValues(dt); part.cols%bv != 0 {
			return nil, wrap(fmt.Errorf("%d columns are not whole %s blocks", part.cols, dt))
		}
		eb := part.rows * dt.RowBytes(part.cols)
		if len(t.data) != mc.Experts*eb {
			return nil, wrap(fmt.Errorf("%d bytes, want %d", len(t.data), mc.Experts*eb))
		}
		for e := range out {
			w, err := m.be.Weight(dt, part.rows, part.cols, t.data[e*eb:(e+1)*eb])
			if err != nil {
				return nil, wrap(fmt.Errorf("expert %d: %w", e, err))
			}
			*part.w(&out[e]) = w
		}
		m.weightBytes += int64(len(t.data))
		// biases (gpt-oss): [experts × rows]
		bname := fmt.Sprintf("model.layers.%d.mlp.experts.%s.bias", l, part.name)
		bt, ok, err := src.get(bname)
		if err != nil {
			return nil, wrap(err)
		}
		if !ok {
			continue
		}
		if bt.experts != 0 || bt.rows != mc.Experts || bt.cols != part.rows {
			return nil, wrap(fmt.Errorf("bias shape [%d × %d], want [%d × %d]", bt.rows, bt.cols, mc.Experts, part.rows))
		}
		bf, err := decodeF32(bt)
		if err != nil {
			return nil, wrap(err)
		}
		m.weightBytes += int64(len(bt.data))
		for e := range out {
			if *part.b(&out[e]), err = m.be.WeightF32(1, part.rows, bf[e*part.rows:(e+1)*part.rows]); err != nil {
				return nil, wrap(err)
			}
		}
	}
	return out, nil
}

// hfQwen3Experts loads Qwen3-MoE's per-expert 2-D tensors in place.
func (m *Model) hfQwen3Experts(l int, get func(name string, rows, cols int, optional bool) kernels.Tensor) ([]ExpertWeights, error) {
	c, mc := &m.Cfg, &m.Cfg.MoE.MoE
	out := make([]ExpertWeights, mc.Experts)
	for e := range out {
		p := fmt.Sprintf("model.layers.%d.mlp.experts.%d.", l, e)
		out[e].Gate = get(p+"gate_proj.weight", mc.Hidden, c.Dim, false)
		out[e].Up = get(p+"up_proj.weight", mc.Hidden, c.Dim, false)
		out[e].Down = get(p+"down_proj.weight", c.Dim, mc.Hidden, false)
		if out[e].Down == nil {
			return nil, nil // get recorded the error
		}
	}
	return out, nil
}

// hfGptOssExperts loads gpt-oss's MXFP4 experts from the split layout:
// gate_up_proj_blocks [experts × 2·hidden × dim/32 × 16] and _scales
// [experts × 2·hidden × dim/32] (gate row i is row 2i, up row i is row
// 2i+1), down_proj_blocks [experts × dim × hidden/32 × 16] and _scales, and
// the biases [experts × 2·hidden] and [experts × dim]. Each expert's
// matrices are repacked into ggml's MXFP4 layout.
func (m *Model) hfGptOssExperts(s *hfSource, l int) ([]ExpertWeights, error) {
	c, mc := &m.Cfg, &m.Cfg.MoE.MoE
	E, H, D := mc.Experts, mc.Hidden, c.Dim
	p := fmt.Sprintf("model.layers.%d.mlp.experts.", l)
	raw := func(name string, shape ...int) ([]byte, string, error) {
		b, ti, _, err := s.m.TensorData(p + name)
		if err != nil {
			return nil, "", fmt.Errorf("model: %s: %s%s: %w", s.path(), p, name, err)
		}
		if fmt.Sprint(ti.Shape) != fmt.Sprint(shape) {
			return nil, "", fmt.Errorf("model: %s: %s%s has shape %v, want %v", s.path(), p, name, ti.Shape, shape)
		}
		m.weightBytes += int64(len(b))
		return b, ti.DType, nil
	}
	if D%32 != 0 || H%32 != 0 {
		return nil, fmt.Errorf("model: %s: MXFP4 experts need widths that are multiples of 32 (dim %d, hidden %d)", s.path(), D, H)
	}
	guB, _, err := raw("gate_up_proj_blocks", E, 2*H, D/32, 16)
	if err != nil {
		return nil, err
	}
	guS, _, err := raw("gate_up_proj_scales", E, 2*H, D/32)
	if err != nil {
		return nil, err
	}
	dnB, _, err := raw("down_proj_blocks", E, D, H/32, 16)
	if err != nil {
		return nil, err
	}
	dnS, _, err := raw("down_proj_scales", E, D, H/32)
	if err != nil {
		return nil, err
	}
	bias := func(name string, rows, cols int) ([]float32, error) {
		b, dt, err := raw(name, rows, cols)
		if err != nil {
			return nil, err
		}
		f, err := decodeF32(rawTensor{enc: dt, rows: rows, cols: cols, data: b})
		if err != nil {
			return nil, fmt.Errorf("model: %s: %s%s: %w", s.path(), p, name, err)
		}
		return f, nil
	}
	guBias, err := bias("gate_up_proj_bias", E, 2*H)
	if err != nil {
		return nil, err
	}
	dnBias, err := bias("down_proj_bias", E, D)
	if err != nil {
		return nil, err
	}
	// rowsOf repacks the given rows of one expert's split blocks/scales
	// (nb blocks per row) into ggml's layout.
	rowsOf := func(blocks, scales []byte, nb int, rows []int) ([]byte, error) {
		bb, ss := make([]byte, 0, len(rows)*nb*16), make([]byte, 0, len(rows)*nb)
		for _, r := range rows {
			bb = append(bb, blocks[r*nb*16:(r+1)*nb*16]...)
			ss = append(ss, scales[r*nb:(r+1)*nb]...)
		}
		return quant.MXFP4FromSplit(bb, ss)
	}
	even, odd, all := make([]int, H), make([]int, H), make([]int, D)
	for i := range even {
		even[i], odd[i] = 2*i, 2*i+1
	}
	for i := range all {
		all[i] = i
	}
	out := make([]ExpertWeights, E)
	for e := range out {
		ex := &out[e]
		gb, gs := guB[e*2*H*D/32*16:(e+1)*2*H*D/32*16], guS[e*2*H*D/32:(e+1)*2*H*D/32]
		db, ds := dnB[e*D*H/32*16:(e+1)*D*H/32*16], dnS[e*D*H/32:(e+1)*D*H/32]
		for _, w := range []struct {
			dst          *kernels.Tensor
			blocks, scls []byte
			nb           int
			rows         []int
			cols         int
		}{{&ex.Gate, gb, gs, D / 32, even, D}, {&ex.Up, gb, gs, D / 32, odd, D}, {&ex.Down, db, ds, H / 32, all, H}} {
			q, err := rowsOf(w.blocks, w.scls, w.nb, w.rows)
			if err == nil {
				*w.dst, err = m.be.Weight(kernels.MXFP4, len(w.rows), w.cols, q)
			}
			if err != nil {
				return nil, fmt.Errorf("model: %s: %s expert %d: %w", s.path(), p, e, err)
			}
		}
		gbias, ubias := make([]float32, H), make([]float32, H)
		for i := 0; i < H; i++ {
			gbias[i], ubias[i] = guBias[e*2*H+2*i], guBias[e*2*H+2*i+1]
		}
		for _, b := range []struct {
			dst *kernels.Tensor
			v   []float32
		}{{&ex.GateBias, gbias}, {&ex.UpBias, ubias}, {&ex.DownBias, dnBias[e*D : (e+1)*D]}} {
			if *b.dst, err = m.be.WeightF32(1, len(b.v), b.v); err != nil {
				return nil, fmt.Errorf("model: %s: %s expert %d bias: %w", s.path(), p, e, err)
			}
		}
	}
	return out, nil
}
