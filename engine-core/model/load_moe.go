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
// layout with gate and up rows interleaved, or (BF16 conversions) as dense
// input-major mlp.experts.{gate_up,down}_proj; either is repacked once
// into the backends' row-major layout (no re-encoding) and the file's
// pages of those tensors are released, so that only the repacked copy is
// resident (hfGptOssExperts). Qwen3-MoE (Qwen3MoeForCausalLM)
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
		if err := m.widenRouter(s, l, L); err != nil {
			return err
		}
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

// widenRouter replaces a checkpoint's BF16 (or F16) router of layer l by
// an F32 copy. GGUF files keep routers at F32 (convert_hf_to_gguf.py and
// llama-quantize do; so does gen-model), so that safetensors and GGUF
// models of the same weights run the router on the same kernel: on the
// CPU backend the F32 panels, which multiply the one-row decode step
// without a parallel op (a BF16 router costs one more per layer and
// token). The values are exact (every BF16/F16 value is an F32 value); the
// copy is experts × dim × 4 bytes a layer (0.4 MB for gpt-oss-20b).
func (m *Model) widenRouter(s *hfSource, l int, L *Layer) error {
	if L.Router.DType() == kernels.F32 {
		return nil
	}
	name := fmt.Sprintf("model.layers.%d.mlp.router.weight", l)
	if m.Cfg.MoE.Family != "gpt_oss" {
		name = fmt.Sprintf("model.layers.%d.mlp.gate.weight", l)
	}
	t, _, err := s.get(name)
	if err == nil {
		var v []float32
		if v, err = decodeF32(t); err == nil {
			var w kernels.Tensor
			if w, err = m.be.WeightF32(t.rows, t.cols, v); err == nil {
				L.Router = w
				m.copiedBytes += int64(4 * len(v))
				releasePages(t.data)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("model: %s: %s as F32: %w", s.path(), name, err)
	}
	return nil
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

// hfGptOssExperts loads gpt-oss's experts in either Hugging Face layout:
//
//   - MXFP4 (the published checkpoint): gate_up_proj_blocks [experts ×
//     2·hidden × dim/32 × 16] and _scales [experts × 2·hidden × dim/32]
//     (gate row i is row 2i, up row i is row 2i+1), down_proj_blocks
//     [experts × dim × hidden/32 × 16] and _scales;
//   - dense (BF16, F16 or F32, as the BF16 conversions store it, the
//     layout transformers' GptOssExperts multiplies with): gate_up_proj
//     [experts × dim × 2·hidden] (input-major; gate is column 2i, up column
//     2i+1) and down_proj [experts × hidden × dim];
//
// and the biases gate_up_proj_bias [experts × 2·hidden] (interleaved the
// same way) and down_proj_bias [experts × dim]. Neither layout is the
// backends' (row-major [out × in] matrices in ggml's MXFP4 blocks or in
// the dense type), so each layer's experts are repacked once into one
// buffer, losslessly, and the file's pages of the repacked tensors are
// then released (releasePages, once the layer is repacked and again at
// the end of build): only the repacked copy stays resident.
func (m *Model) hfGptOssExperts(s *hfSource, l int) ([]ExpertWeights, error) {
	c, mc := &m.Cfg, &m.Cfg.MoE.MoE
	E, H, D := mc.Experts, mc.Hidden, c.Dim
	p := fmt.Sprintf("model.layers.%d.mlp.experts.", l)
	var used [][]byte // the file bytes repacked (see Model.repacked)
	raw := func(name string, shape ...int) ([]byte, string, error) {
		b, ti, _, err := s.m.TensorData(p + name)
		if err != nil {
			return nil, "", fmt.Errorf("model: %s: %s%s: %w", s.path(), p, name, err)
		}
		if fmt.Sprint(ti.Shape) != fmt.Sprint(shape) {
			return nil, "", fmt.Errorf("model: %s: %s%s has shape %v, want %v", s.path(), p, name, ti.Shape, shape)
		}
		m.weightBytes += int64(len(b))
		used = append(used, b)
		return b, ti.DType, nil
	}
	var out []ExpertWeights
	var err error
	if _, ok := s.m.Tensor(p + "gate_up_proj_blocks"); ok {
		out, err = m.gptOssMXFP4(s, p, raw)
	} else {
		out, err = m.gptOssDense(s, p, raw)
	}
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
	for e := range out {
		ex := &out[e]
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
	// Release the layer's file pages now, so that the load holds at most
	// one layer's worth of them beside the repacked copies (else the peak
	// is file + copy: 20 GB for gpt-oss-20b); build releases them again
	// at the end, for pages a later read's fault-around mapped back.
	for _, b := range used {
		releasePages(b)
	}
	m.repacked = append(m.repacked, used...)
	return out, nil
}

// gptOssMXFP4 repacks one layer's MXFP4 experts (the split layout, see
// hfGptOssExperts) into ggml's blocks: one buffer holding, per expert, the
// gate, up and down matrices row-major.
func (m *Model) gptOssMXFP4(s *hfSource, p string, raw func(string, ...int) ([]byte, string, error)) ([]ExpertWeights, error) {
	c, mc := &m.Cfg, &m.Cfg.MoE.MoE
	E, H, D := mc.Experts, mc.Hidden, c.Dim
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
	gb, db := D/32, H/32 // blocks per row of gate/up and of down
	gm, dm := H*gb*quant.MXFP4BlockBytes, D*db*quant.MXFP4BlockBytes
	buf := make([]byte, E*(2*gm+dm))
	m.copiedBytes += int64(len(buf))
	out := make([]ExpertWeights, E)
	for e := range out {
		eb := buf[e*(2*gm+dm) : (e+1)*(2*gm+dm)]
		gate, up, down := eb[:gm], eb[gm:2*gm], eb[2*gm:]
		for i := 0; i < 2*H; i++ { // row i of gate_up: gate row i/2 or up row i/2
			r := e*2*H + i
			dst := gate
			if i%2 == 1 {
				dst = up
			}
			dst = dst[i/2*gb*quant.MXFP4BlockBytes : (i/2+1)*gb*quant.MXFP4BlockBytes]
			if err := quant.MXFP4FromSplit(dst, guB[r*gb*16:(r+1)*gb*16], guS[r*gb:(r+1)*gb]); err != nil {
				return nil, fmt.Errorf("model: %s: %s expert %d: %w", s.path(), p, e, err)
			}
		}
		if err := quant.MXFP4FromSplit(down, dnB[e*D*db*16:(e+1)*D*db*16], dnS[e*D*db:(e+1)*D*db]); err != nil {
			return nil, fmt.Errorf("model: %s: %s expert %d: %w", s.path(), p, e, err)
		}
		ex := &out[e]
		for _, w := range []struct {
			dst        *kernels.Tensor
			q          []byte
			rows, cols int
		}{{&ex.Gate, gate, H, D}, {&ex.Up, up, H, D}, {&ex.Down, down, D, H}} {
			if *w.dst, err = m.be.Weight(kernels.MXFP4, w.rows, w.cols, w.q); err != nil {
				return nil, fmt.Errorf("model: %s: %s expert %d: %w", s.path(), p, e, err)
			}
		}
	}
	return out, nil
}

// gptOssDense repacks one layer's dense experts (BF16, F16 or F32,
// input-major, see hfGptOssExperts) into row-major matrices of the same
// type (a transpose; values are not converted): one buffer holding, per
// expert, the gate, up and down matrices.
func (m *Model) gptOssDense(s *hfSource, p string, raw func(string, ...int) ([]byte, string, error)) ([]ExpertWeights, error) {
	c, mc := &m.Cfg, &m.Cfg.MoE.MoE
	E, H, D := mc.Experts, mc.Hidden, c.Dim
	if _, ok := s.m.Tensor(p + "gate_up_proj"); !ok {
		return nil, fmt.Errorf("model: %s: %s: neither gate_up_proj_blocks (MXFP4) nor gate_up_proj (BF16, F16 or F32) experts", s.path(), p)
	}
	gu, gt, err := raw("gate_up_proj", E, D, 2*H)
	if err != nil {
		return nil, err
	}
	dn, dt, err := raw("down_proj", E, H, D)
	if err != nil {
		return nil, err
	}
	if gt != dt {
		return nil, fmt.Errorf("model: %s: %s: gate_up_proj is %s but down_proj %s", s.path(), p, gt, dt)
	}
	typ, ok := map[string]kernels.DType{"BF16": kernels.BF16, "F16": kernels.F16, "F32": kernels.F32}[gt]
	if !ok {
		return nil, fmt.Errorf("model: %s: %sgate_up_proj: unsupported dtype %s (want MXFP4 blocks, BF16, F16 or F32)", s.path(), p, gt)
	}
	es := typ.RowBytes(1)
	gm, dm := H*D*es, D*H*es
	buf := make([]byte, E*(2*gm+dm))
	m.copiedBytes += int64(len(buf))
	out := make([]ExpertWeights, E)
	for e := range out {
		eb := buf[e*(2*gm+dm) : (e+1)*(2*gm+dm)]
		gate, up, down := eb[:gm], eb[gm:2*gm], eb[2*gm:]
		src := gu[e*gm*2 : (e+1)*gm*2] // [D × 2H]
		// gate[i][k] = src[k][2i], up[i][k] = src[k][2i+1]
		transpose(gate, src, D, H, es, 2*H, 2, 0)
		transpose(up, src, D, H, es, 2*H, 2, 1)
		// down[d][h] = dn[e][h][d]
		transpose(down, dn[e*dm:(e+1)*dm], H, D, es, D, 1, 0)
		ex := &out[e]
		for _, w := range []struct {
			dst        *kernels.Tensor
			q          []byte
			rows, cols int
		}{{&ex.Gate, gate, H, D}, {&ex.Up, up, H, D}, {&ex.Down, down, D, H}} {
			if typ == kernels.F32 {
				*w.dst, err = m.be.WeightF32(w.rows, w.cols, kernels.BytesToF32(w.q))
			} else {
				*w.dst, err = m.be.Weight(typ, w.rows, w.cols, w.q)
			}
			if err != nil {
				return nil, fmt.Errorf("model: %s: %s expert %d: %w", s.path(), p, e, err)
			}
		}
	}
	return out, nil
}

// transpose sets dst (rows × n elements of es bytes, row-major) to
// dst[i][k] = src[k][step·i + off], src holding n rows of width elements:
// a transpose that also takes every step-th column from off (gpt-oss's
// interleaved gate and up columns). It walks 32 × 32 tiles so that both
// sides stay in cache.
func transpose(dst, src []byte, n, rows, es, width, step, off int) {
	const tile = 32
	for i0 := 0; i0 < rows; i0 += tile {
		for k0 := 0; k0 < n; k0 += tile {
			for i := i0; i < min(i0+tile, rows); i++ {
				d := dst[i*n*es:]
				j := (step*i + off) * es
				for k := k0; k < min(k0+tile, n); k++ {
					copy(d[k*es:(k+1)*es], src[k*width*es+j:k*width*es+j+es])
				}
			}
		}
	}
}
