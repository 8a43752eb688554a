// Package hfconfig reads a Hugging Face model's config.json (and its
// generation_config.json) into the fields a decoder-only transformer
// runtime needs, with the defaults transformers applies when a field is
// absent.
package hfconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// RopeScaling is config.json's rope_scaling object.
type RopeScaling struct {
	// Type is "llama3", "linear", "dynamic", ... (rope_type, or the older
	// type key).
	Type                          string  `json:"rope_type"`
	LegacyType                    string  `json:"type"`
	Factor                        float64 `json:"factor"`
	LowFreqFactor                 float64 `json:"low_freq_factor"`
	HighFreqFactor                float64 `json:"high_freq_factor"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings"`
}

// Config is the subset of config.json the engine uses.
type Config struct {
	Architectures         []string     `json:"architectures"`
	ModelType             string       `json:"model_type"`
	HiddenSize            int          `json:"hidden_size"`
	IntermediateSize      int          `json:"intermediate_size"`
	NumHiddenLayers       int          `json:"num_hidden_layers"`
	NumAttentionHeads     int          `json:"num_attention_heads"`
	NumKeyValueHeads      int          `json:"num_key_value_heads"`
	HeadDim               int          `json:"head_dim"`
	RMSNormEps            float64      `json:"rms_norm_eps"`
	RopeTheta             float64      `json:"rope_theta"`
	RopeScaling           *RopeScaling `json:"rope_scaling"`
	MaxPositionEmbeddings int          `json:"max_position_embeddings"`
	VocabSize             int          `json:"vocab_size"`
	TieWordEmbeddings     bool         `json:"tie_word_embeddings"`
	AttentionBias         bool         `json:"attention_bias"`
	TorchDType            string       `json:"torch_dtype"`
	// SlidingWindow and LayerTypes ("sliding_attention" or
	// "full_attention" per layer) describe sliding-window layers (gpt-oss).
	SlidingWindow int      `json:"sliding_window"`
	LayerTypes    []string `json:"layer_types"`
	// BOSTokenID and EOSTokenIDs come from config.json, overridden by
	// generation_config.json when that file names them. eos_token_id may
	// be a number or a list.
	BOSTokenID  *int32  `json:"-"`
	EOSTokenIDs []int32 `json:"-"`

	// RawBOS and RawEOS are the undecoded bos_token_id and eos_token_id
	// (a number, a list or null); Parse decodes them into the fields above.
	RawBOS json.RawMessage `json:"bos_token_id"`
	RawEOS json.RawMessage `json:"eos_token_id"`
}

// Load reads dir/config.json and, when present, dir/generation_config.json.
func Load(dir string) (*Config, error) {
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("hfconfig: read %s: %w", path, err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("hfconfig: %s: %w", path, err)
	}
	gpath := filepath.Join(dir, "generation_config.json")
	if g, err := os.ReadFile(gpath); err == nil {
		var gc struct {
			BOS json.RawMessage `json:"bos_token_id"`
			EOS json.RawMessage `json:"eos_token_id"`
		}
		if err := json.Unmarshal(g, &gc); err != nil {
			return nil, fmt.Errorf("hfconfig: parse %s: %w", gpath, err)
		}
		if ids, err := idList(gc.BOS); err == nil && len(ids) > 0 {
			c.BOSTokenID = &ids[0]
		}
		if ids, err := idList(gc.EOS); err == nil && len(ids) > 0 {
			c.EOSTokenIDs = ids
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("hfconfig: read %s: %w", gpath, err)
	}
	return c, nil
}

// Parse decodes config.json bytes, fills transformers' defaults and checks
// the numbers are consistent.
func Parse(data []byte) (*Config, error) {
	c := &Config{TieWordEmbeddings: false}
	// tie_word_embeddings defaults to true in PretrainedConfig; detect
	// whether the key is present.
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	if _, ok := keys["tie_word_embeddings"]; !ok {
		c.TieWordEmbeddings = defaultTie(c.ModelType)
	}
	bos, err := idList(c.RawBOS)
	if err != nil {
		return nil, fmt.Errorf("bos_token_id: %w", err)
	}
	if len(bos) > 0 {
		c.BOSTokenID = &bos[0]
	}
	if c.EOSTokenIDs, err = idList(c.RawEOS); err != nil {
		return nil, fmt.Errorf("eos_token_id: %w", err)
	}
	if c.NumKeyValueHeads == 0 {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-6
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.RopeScaling != nil && c.RopeScaling.Type == "" {
		c.RopeScaling.Type = c.RopeScaling.LegacyType
	}
	if c.HeadDim == 0 && c.NumAttentionHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	if c.HiddenSize <= 0 || c.IntermediateSize <= 0 || c.NumHiddenLayers <= 0 || c.NumAttentionHeads <= 0 || c.VocabSize <= 0 {
		return nil, fmt.Errorf("config needs positive hidden_size, intermediate_size, num_hidden_layers, num_attention_heads and vocab_size (got %d, %d, %d, %d, %d)",
			c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers, c.NumAttentionHeads, c.VocabSize)
	}
	if c.NumKeyValueHeads <= 0 || c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return nil, fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.HeadDim <= 0 || c.HeadDim%2 != 0 {
		return nil, fmt.Errorf("head_dim %d must be positive and even", c.HeadDim)
	}
	return c, nil
}

// defaultTie is the tie_word_embeddings default of each model class.
func defaultTie(modelType string) bool {
	switch modelType {
	case "llama", "mistral", "qwen2", "qwen3":
		return false
	}
	return true
}

// idList decodes a token id that may be null, a number or a list.
func idList(raw json.RawMessage) ([]int32, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '[' {
		var ids []int32
		if err := json.Unmarshal(raw, &ids); err != nil {
			return nil, err
		}
		return ids, nil
	}
	var id int32
	if err := json.Unmarshal(raw, &id); err != nil {
		return nil, err
	}
	return []int32{id}, nil
}
