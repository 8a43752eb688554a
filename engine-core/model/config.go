// Package model holds the decoder-only transformer architectures the engine
// runs (Llama 2 and 3, Mistral, Qwen2/2.5, Qwen3, and the mixture-of-experts
// families Qwen3-MoE and gpt-oss), written plainly, top to
// bottom like the papers, over the kernels.Backend interface, and the code
// that loads their weights from Hugging Face directories (config.json +
// safetensors), GGUF files and llama2.c checkpoints.
//
// The architectures differ only in a few switches (Config): grouped-query
// attention, tied embeddings, q/k/v biases (Qwen2), per-head q/k RMSNorm
// (Qwen3), the RoPE frequencies (rope_theta, Llama 3 scaling) and which
// elements RoPE pairs up. That last switch is a property of the weight
// file, not the architecture: Hugging Face checkpoints rotate halves
// (rotate_half), while llama2.c checkpoints and llama.cpp's GGUF llama
// weights (whose converter permutes the q and k rows) rotate interleaved
// pairs. Loading picks the style per file so the same model gives the same
// logits from every format.
//
// The mixture-of-experts families add a Config.MoE (moe_model.go): expert
// blocks run per expert on the rows routed to them, gpt-oss's attention
// sinks, sliding-window layers and YaRN (load_moe.go reads both formats).
//
// Not implemented: Mistral's sliding_window (ignored, which is exact for
// contexts up to the window; gpt-oss's is implemented), freeing KV blocks
// that left a sliding layer's window, and RoPE scaling other than
// "llama3", "linear" and gpt-oss's "yarn" (such configs fail at load).
package model

import (
	"fmt"
	"math"
	"strings"

	"github.com/sluice-llm/sluice/kernels"
)

// SupportedArchitectures lists the Hugging Face architectures Load accepts.
var SupportedArchitectures = []string{"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "GptOssForCausalLM"}

// RopeScaling is a RoPE frequency scaling rule.
type RopeScaling struct {
	// Type is "llama3" or "linear".
	Type                          string
	Factor                        float64
	LowFreqFactor, HighFreqFactor float64
	OriginalMaxPos                int
}

// Config is everything the forward pass needs to know about a model.
type Config struct {
	// Arch is "llama" (also Mistral), "qwen2" or "qwen3".
	Arch string
	// Name is a display name for the model.
	Name string

	Dim, Hidden, Layers, Heads, KVHeads, HeadDim, Vocab int

	NormEps     float32
	RopeTheta   float64
	RopeScaling *RopeScaling
	// RopeFreqFactors, when set (GGUF rope_freqs.weight), divide the
	// rotary frequencies one by one.
	RopeFreqFactors []float32
	RopeStyle       kernels.RoPEStyle
	// MaxPos is the longest context the model supports.
	MaxPos int

	// Tied means the output projection is the token embedding.
	Tied bool
	// QKVBias adds biases to the q, k and v projections; OBias to o.
	QKVBias, OBias bool
	// QKNorm applies an RMSNorm to each query and key head (Qwen3).
	QKNorm bool

	// MoE, when set, describes a mixture-of-experts family (gpt-oss,
	// Qwen3-MoE): which layers have an expert block instead of the dense
	// MLP, sliding-window layers, attention sinks and YaRN (moe_model.go).
	MoE *MoEArch

	// BOS is the beginning-of-sequence token, or -1.
	BOS int32
	// EOS lists the end-of-sequence tokens.
	EOS []int32
}

// KVDim is the width of one layer's key (or value) row.
func (c *Config) KVDim() int { return c.KVHeads * c.HeadDim }

// QDim is the width of the query projection.
func (c *Config) QDim() int { return c.Heads * c.HeadDim }

// archFromHF maps a Hugging Face architecture name to Config.Arch.
func archFromHF(archs []string, modelType string) (string, error) {
	for _, a := range archs {
		switch a {
		case "LlamaForCausalLM", "MistralForCausalLM":
			return "llama", nil
		case "Qwen2ForCausalLM":
			return "qwen2", nil
		case "Qwen3ForCausalLM":
			return "qwen3", nil
		}
	}
	if len(archs) == 0 {
		switch modelType {
		case "llama", "mistral":
			return "llama", nil
		case "qwen2", "qwen3":
			return modelType, nil
		}
	}
	return "", fmt.Errorf("unsupported architecture %v (model_type %q); supported: %s",
		archs, modelType, strings.Join(SupportedArchitectures, ", "))
}

// RopeAttnFactor is the factor YaRN applies to RoPE's cosines and sines
// (1 without YaRN).
func (c *Config) RopeAttnFactor() float64 {
	if c.MoE == nil || c.MoE.YaRN == nil {
		return 1
	}
	_, f := c.MoE.YaRN.InvFreq(c.HeadDim, c.RopeTheta)
	return f
}

// validate checks the geometry.
func (c *Config) validate() error {
	if c.Dim <= 0 || c.Hidden <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0 || c.Vocab <= 0 {
		return fmt.Errorf("bad model geometry %+v", *c)
	}
	if c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("heads %d not a multiple of kv heads %d", c.Heads, c.KVHeads)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("head dim %d is odd", c.HeadDim)
	}
	if c.RopeScaling != nil && c.RopeScaling.Type != "llama3" && c.RopeScaling.Type != "linear" {
		return fmt.Errorf("rope_scaling type %q not supported (supported: llama3, linear)", c.RopeScaling.Type)
	}
	if c.MaxPos <= 0 {
		return fmt.Errorf("max position %d", c.MaxPos)
	}
	if a := c.MoE; a != nil {
		if a.MoE.Dim != c.Dim {
			return fmt.Errorf("expert block width %d, model width %d", a.MoE.Dim, c.Dim)
		}
		if err := a.MoE.validate(); err != nil {
			return err
		}
		if len(a.SparseLayer) != c.Layers || len(a.SlidingLayer) != c.Layers {
			return fmt.Errorf("%d sparse / %d sliding layer flags for %d layers", len(a.SparseLayer), len(a.SlidingLayer), c.Layers)
		}
		for l, sl := range a.SlidingLayer {
			if sl && a.SlidingWindow <= 0 {
				return fmt.Errorf("layer %d slides over a window of %d positions", l, a.SlidingWindow)
			}
		}
	}
	return nil
}

// InvFreq returns the rotary inverse frequencies (one per pair), with the
// model's scaling applied, as transformers' rope initialisation functions
// compute them.
func (c *Config) InvFreq() []float64 {
	if c.MoE != nil && c.MoE.YaRN != nil {
		inv, _ := c.MoE.YaRN.InvFreq(c.HeadDim, c.RopeTheta)
		return inv
	}
	half := c.HeadDim / 2
	inv := make([]float64, half)
	for j := range inv {
		inv[j] = 1 / math.Pow(c.RopeTheta, float64(2*j)/float64(c.HeadDim))
	}
	if s := c.RopeScaling; s != nil {
		switch s.Type {
		case "linear":
			for j := range inv {
				inv[j] /= s.Factor
			}
		case "llama3":
			old := float64(s.OriginalMaxPos)
			lowWave := old / s.LowFreqFactor
			highWave := old / s.HighFreqFactor
			for j, f := range inv {
				wave := 2 * math.Pi / f
				switch {
				case wave < highWave:
				case wave > lowWave:
					inv[j] = f / s.Factor
				default:
					smooth := (old/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
					inv[j] = (1-smooth)*f/s.Factor + smooth*f
				}
			}
		}
	}
	for j := range inv {
		if j < len(c.RopeFreqFactors) && c.RopeFreqFactors[j] != 0 {
			inv[j] /= float64(c.RopeFreqFactors[j])
		}
	}
	return inv
}
