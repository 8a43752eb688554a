package model

import (
	"encoding/json"
	"fmt"
)

// MoEArch is what a mixture-of-experts family's config.json adds to the
// dense Config: the expert block, which layers have it, and gpt-oss's
// attention details. ParseMoEArch reads it; load.go does not use it yet.
type MoEArch struct {
	// Family is "gpt_oss" or "qwen3_moe".
	Family string
	// MoE is the expert block's configuration (Dim and Hidden included).
	MoE MoEConfig
	// SparseLayer[l] reports whether layer l uses the MoE block (otherwise
	// a dense MLP of the config's intermediate_size; Qwen3-MoE's
	// decoder_sparse_step and mlp_only_layers).
	SparseLayer []bool
	// SlidingLayer[l] reports whether layer l attends over only the last
	// SlidingWindow positions (gpt-oss's layer_types).
	SlidingLayer  []bool
	SlidingWindow int
	// Sinks: every attention head has a learned sink logit (gpt-oss).
	Sinks bool
	// AttentionBias: q, k, v and o projections have biases.
	AttentionBias bool
	// YaRN is the "yarn" rope_scaling, nil if none.
	YaRN *YaRN
	// Quant is quantization_config.quant_method ("mxfp4" for gpt-oss's
	// release), "" if none.
	Quant string
}

// hfMoE holds the config.json fields ParseMoEArch reads.
type hfMoE struct {
	ModelType        string   `json:"model_type"`
	Architectures    []string `json:"architectures"`
	HiddenSize       int      `json:"hidden_size"`
	IntermediateSize int      `json:"intermediate_size"`
	Layers           int      `json:"num_hidden_layers"`
	// gpt-oss
	LocalExperts  int      `json:"num_local_experts"`
	SwigluLimit   *float64 `json:"swiglu_limit"`
	LayerTypes    []string `json:"layer_types"`
	SlidingWindow int      `json:"sliding_window"`
	AttentionBias *bool    `json:"attention_bias"`
	RopeScaling   *struct {
		RopeType       string  `json:"rope_type"`
		Type           string  `json:"type"`
		Factor         float64 `json:"factor"`
		OriginalMaxPos int     `json:"original_max_position_embeddings"`
		BetaFast       float64 `json:"beta_fast"`
		BetaSlow       float64 `json:"beta_slow"`
		Truncate       *bool   `json:"truncate"`
		AttnFactor     float64 `json:"attention_factor"`
	} `json:"rope_scaling"`
	Quantization *struct {
		QuantMethod string `json:"quant_method"`
	} `json:"quantization_config"`
	// Qwen3-MoE
	Experts           int   `json:"num_experts"`
	ExpertsPerTok     int   `json:"num_experts_per_tok"`
	MoEIntermediate   int   `json:"moe_intermediate_size"`
	NormTopKProb      *bool `json:"norm_topk_prob"`
	DecoderSparseStep int   `json:"decoder_sparse_step"`
	MLPOnlyLayers     []int `json:"mlp_only_layers"`
}

// maxMoELayers bounds num_hidden_layers so that a hostile config cannot
// make the parser allocate without limit.
const maxMoELayers = 4096

// ParseMoEArch reads the mixture-of-experts part of a gpt-oss or
// Qwen3-MoE config.json, with the families' defaults (transformers'
// GptOssConfig and Qwen3MoeConfig).
func ParseMoEArch(data []byte) (*MoEArch, error) {
	var h hfMoE
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("parse config.json: %w", err)
	}
	family := h.ModelType
	for _, a := range h.Architectures {
		switch a {
		case "GptOssForCausalLM":
			family = "gpt_oss"
		case "Qwen3MoeForCausalLM":
			family = "qwen3_moe"
		}
	}
	if h.HiddenSize <= 0 || h.Layers <= 0 || h.Layers > maxMoELayers {
		return nil, fmt.Errorf("config.json: bad hidden_size %d or num_hidden_layers %d", h.HiddenSize, h.Layers)
	}
	a := &MoEArch{Family: family, SparseLayer: make([]bool, h.Layers), SlidingLayer: make([]bool, h.Layers)}
	switch family {
	case "gpt_oss":
		alpha, limit := GptOssSwiGLU()
		if h.SwigluLimit != nil {
			limit = float32(*h.SwigluLimit)
		}
		a.MoE = MoEConfig{Dim: h.HiddenSize, Hidden: h.IntermediateSize, Experts: h.LocalExperts, TopK: h.ExpertsPerTok,
			Routing: RouteTopKSoftmax, Act: ActClampedSwiGLU, Alpha: alpha, Limit: limit}
		for l := range a.SparseLayer {
			a.SparseLayer[l] = true
		}
		if len(h.LayerTypes) != 0 && len(h.LayerTypes) != h.Layers {
			return nil, fmt.Errorf("config.json: %d layer_types for %d layers", len(h.LayerTypes), h.Layers)
		}
		for l, t := range h.LayerTypes {
			switch t {
			case "sliding_attention":
				a.SlidingLayer[l] = true
			case "full_attention":
			default:
				return nil, fmt.Errorf("config.json: layer_types[%d] %q unknown", l, t)
			}
		}
		a.SlidingWindow = h.SlidingWindow
		a.Sinks = true
		a.AttentionBias = h.AttentionBias == nil || *h.AttentionBias // GptOssConfig's default: true
	case "qwen3_moe":
		normTopK := false // Qwen3MoeConfig's default
		if h.NormTopKProb != nil {
			normTopK = *h.NormTopKProb
		}
		a.MoE = MoEConfig{Dim: h.HiddenSize, Hidden: h.MoEIntermediate, Experts: h.Experts, TopK: h.ExpertsPerTok,
			Routing: RouteSoftmaxTopK, NormTopK: normTopK, Act: ActSwiGLU}
		step := h.DecoderSparseStep
		if step == 0 {
			step = 1
		}
		dense := map[int]bool{}
		for _, l := range h.MLPOnlyLayers {
			dense[l] = true
		}
		for l := range a.SparseLayer {
			// transformers: (layer_idx not in mlp_only_layers) and
			// num_experts > 0 and (layer_idx + 1) % decoder_sparse_step == 0
			a.SparseLayer[l] = !dense[l] && h.Experts > 0 && (l+1)%step == 0
		}
		a.AttentionBias = h.AttentionBias != nil && *h.AttentionBias // Qwen3MoeConfig's default: false
	default:
		return nil, fmt.Errorf("config.json: %q is not a mixture-of-experts family Sluice knows (gpt_oss, qwen3_moe)", family)
	}
	if rs := h.RopeScaling; rs != nil && (rs.RopeType == "yarn" || rs.Type == "yarn") {
		y := YaRN{Factor: rs.Factor, OriginalMaxPos: rs.OriginalMaxPos, BetaFast: rs.BetaFast, BetaSlow: rs.BetaSlow,
			Truncate: true, AttentionFactor: rs.AttnFactor}
		if rs.Truncate != nil {
			y.Truncate = *rs.Truncate
		}
		if y.Factor <= 0 || y.OriginalMaxPos <= 0 {
			return nil, fmt.Errorf("config.json: yarn rope_scaling needs factor and original_max_position_embeddings")
		}
		a.YaRN = &y
	}
	if h.Quantization != nil {
		a.Quant = h.Quantization.QuantMethod
	}
	if err := a.MoE.validate(); err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	return a, nil
}
