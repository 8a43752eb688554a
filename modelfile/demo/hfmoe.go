package demo

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/sluice-llm/sluice/modelfile/safetensors"
	"github.com/sluice-llm/sluice/quant"
)

// HFShardBytes is the largest shard GenerateHF writes: transformers'
// save_pretrained default (max_shard_size "5GB"), which split
// openai/gpt-oss-20b's 13.8 GB into three files.
const HFShardBytes = 5_000_000_000

// GenerateHF writes a random-weight gpt-oss-shaped model (shape one of
// RealShapes with Arch "gpt-oss") into dir in the layout openai/gpt-oss-20b
// publishes: config.json (model_type gpt_oss, layer_types, sliding_window,
// YaRN rope_scaling, quantization_config mxfp4), generation_config.json,
// and the weights as sharded safetensors (model-0000N-of-0000M.safetensors,
// numbered from 0 as that repository's are, plus
// model.safetensors.index.json; one model.safetensors when everything fits
// in one shard). Experts are MXFP4 in the split layout
// (mlp.experts.gate_up_proj_blocks/_scales with gate and up rows
// interleaved, down_proj_blocks/_scales), everything else BF16.
//
// The weights are GenerateReal's for gguf-mxfp4 with the same shape and
// seed: the same expert blocks, the same BF16 matrices, and the F32
// vectors (norms, biases, sinks, router) rounded to BF16. It streams
// tensor by tensor, so memory stays at a few MB whatever the size. No
// tokenizer is written: gpt-oss is served with --tokenizer o200k_harmony.
func GenerateHF(dir, shape string, seed int64) error {
	s, ok := RealShapes[shape]
	if !ok {
		return fmt.Errorf("demo: unknown shape %q", shape)
	}
	return GenerateHFShape(dir, s, seed, HFShardBytes)
}

// hfTensor is one tensor of a generated Hugging Face checkpoint.
type hfTensor struct {
	safetensors.Tensor
	fill func(w io.Writer) error
}

// GenerateHFShape is GenerateHF for any gpt-oss geometry, in shards of at
// most shardBytes (a tensor larger than that gets a shard of its own).
func GenerateHFShape(dir string, s RealShape, seed int64, shardBytes int64) error {
	if s.Arch != "gpt-oss" {
		return fmt.Errorf("demo: shape %s (%s) is written as GGUF only; --format hf takes the gpt-oss shapes", s.Name, s.Arch)
	}
	if s.Dim%quant.MXFP4Block != 0 || s.ExpertHidden%quant.MXFP4Block != 0 {
		return fmt.Errorf("demo: shape %s: MXFP4 experts need widths that are multiples of 32", s.Name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	ts := gptOssHFTensors(s, seed)
	// shards: tensors in order, a new shard when the next would pass
	// shardBytes
	var shards [][]hfTensor
	var size, total int64
	for _, t := range ts {
		n, err := safetensors.TensorBytes(t.DType, t.Shape)
		if err != nil {
			return fmt.Errorf("demo: %s: %w", t.Name, err)
		}
		if len(shards) == 0 || (size > 0 && size+n > shardBytes) {
			shards = append(shards, nil)
			size = 0
		}
		shards[len(shards)-1] = append(shards[len(shards)-1], t)
		size += n
		total += n
	}
	weightMap := map[string]string{}
	for i, sh := range shards {
		name := "model.safetensors"
		if len(shards) > 1 {
			name = fmt.Sprintf("model-%05d-of-%05d.safetensors", i, len(shards)-1)
		}
		infos := make([]safetensors.Tensor, len(sh))
		for j, t := range sh {
			infos[j] = t.Tensor
			weightMap[t.Name] = name
		}
		err := writeFile(filepath.Join(dir, name), func(f *os.File) error {
			return safetensors.WriteStream(f, infos, map[string]string{"format": "pt"}, func(j int, w io.Writer) error {
				return sh[j].fill(w)
			})
		})
		if err != nil {
			return err
		}
	}
	if len(shards) > 1 {
		err := writeJSON(filepath.Join(dir, "model.safetensors.index.json"), map[string]any{
			"metadata": map[string]any{"total_size": total}, "weight_map": weightMap,
		})
		if err != nil {
			return err
		}
	}
	if err := writeJSON(filepath.Join(dir, "config.json"), gptOssConfig(s)); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, "generation_config.json"), map[string]any{
		"bos_token_id": 199998, "do_sample": true, "eos_token_id": []int{200002, 199999, 200012}, "pad_token_id": 199999,
	})
}

// gptOssConfig is config.json as openai/gpt-oss-20b publishes it, with
// the shape's numbers.
func gptOssConfig(s RealShape) map[string]any {
	layerTypes := make([]string, s.Layers)
	for l := range layerTypes {
		layerTypes[l] = "full_attention"
		if l%2 == 0 {
			layerTypes[l] = "sliding_attention"
		}
	}
	return map[string]any{
		"architectures":           []string{"GptOssForCausalLM"},
		"attention_bias":          true,
		"attention_dropout":       0.0,
		"eos_token_id":            200002,
		"experts_per_token":       s.TopK,
		"head_dim":                s.HeadDim,
		"hidden_act":              "silu",
		"hidden_size":             s.Dim,
		"initial_context_length":  s.YaRNOrigPos,
		"initializer_range":       0.02,
		"intermediate_size":       s.ExpertHidden,
		"layer_types":             layerTypes,
		"max_position_embeddings": s.MaxPos,
		"model_type":              "gpt_oss",
		"num_attention_heads":     s.Heads,
		"num_experts_per_tok":     s.TopK,
		"num_hidden_layers":       s.Layers,
		"num_key_value_heads":     s.KVHeads,
		"num_local_experts":       s.Experts,
		"output_router_logits":    false,
		"pad_token_id":            199999,
		"quantization_config": map[string]any{
			"modules_to_not_convert": []string{"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"},
			"quant_method":           "mxfp4",
		},
		"rms_norm_eps": s.NormEps,
		"rope_scaling": map[string]any{
			"beta_fast": 32.0, "beta_slow": 1.0, "factor": s.YaRNFactor,
			"original_max_position_embeddings": s.YaRNOrigPos, "rope_type": "yarn", "truncate": false,
		},
		"rope_theta":           s.RopeTheta,
		"router_aux_loss_coef": 0.9,
		"sliding_window":       s.SlidingWindow,
		"swiglu_limit":         7.0,
		"tie_word_embeddings":  false,
		"torch_dtype":          "bfloat16",
		"transformers_version": "4.55.0.dev0",
		"use_cache":            true,
		"vocab_size":           s.Vocab,
	}
}

// seeded is the generator GenerateReal uses for the tensor it names
// seedName.
func seeded(seed int64, seedName string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(seedName))
	return rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
}

// gptOssHFTensors lists the checkpoint's tensors in order, each with the
// generator of GenerateReal's tensor it mirrors (seedName).
func gptOssHFTensors(s RealShape, seed int64) []hfTensor {
	var ts []hfTensor
	// bf16 is a BF16 tensor of rows·cols values drawn as GenerateReal
	// draws seedName's (N(0, 0.02²), or 1 + N(0, 0.1²) for norms)
	bf16 := func(name, seedName string, shape []int, norm bool) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		ts = append(ts, hfTensor{safetensors.Tensor{Name: name, DType: "BF16", Shape: shape}, func(w io.Writer) error {
			rng := seeded(seed, seedName)
			buf := make([]byte, 0, 2*min(n, 1<<18))
			for left := n; left > 0; {
				k := min(left, 1<<18)
				buf = buf[:0]
				for range k {
					var v float32
					if norm {
						v = float32(1 + 0.1*rng.NormFloat64())
					} else {
						v = float32(0.02 * rng.NormFloat64())
					}
					buf = binary.LittleEndian.AppendUint16(buf, bf16RNE(v))
				}
				if _, err := w.Write(buf); err != nil {
					return err
				}
				left -= k
			}
			return nil
		}})
	}
	E, D, H := s.Experts, s.Dim, s.ExpertHidden
	q, kv := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
	bf16("model.embed_tokens.weight", "model.embed_tokens.weight", []int{s.Vocab, D}, false)
	for l := 0; l < s.Layers; l++ {
		h, g := fmt.Sprintf("model.layers.%d.", l), fmt.Sprintf("blk.%d.", l)
		bf16(h+"input_layernorm.weight", h+"input_layernorm.weight", []int{D}, true)
		for _, p := range []struct {
			name string
			rows int
		}{{"q_proj", q}, {"k_proj", kv}, {"v_proj", kv}} {
			bf16(h+"self_attn."+p.name+".weight", h+"self_attn."+p.name+".weight", []int{p.rows, D}, false)
			bf16(h+"self_attn."+p.name+".bias", h+"self_attn."+p.name+".bias", []int{p.rows}, false)
		}
		bf16(h+"self_attn.o_proj.weight", h+"self_attn.o_proj.weight", []int{D, q}, false)
		bf16(h+"self_attn.o_proj.bias", g+"attn_output.bias", []int{D}, false)
		bf16(h+"self_attn.sinks", g+"attn_sinks.weight", []int{s.Heads}, false)
		bf16(h+"post_attention_layernorm.weight", g+"post_attention_norm.weight", []int{D}, true)
		bf16(h+"mlp.router.weight", g+"ffn_gate_inp.weight", []int{E, D}, false)
		bf16(h+"mlp.router.bias", g+"ffn_gate_inp.bias", []int{E}, false)
		x := h + "mlp.experts."
		gate, up, down := g+"ffn_gate_exps.weight", g+"ffn_up_exps.weight", g+"ffn_down_exps.weight"
		ts = append(ts,
			mxSplit(x+"gate_up_proj_blocks", seed, []string{gate, up}, E, H, D, false),
			mxSplit(x+"gate_up_proj_scales", seed, []string{gate, up}, E, H, D, true),
			interleavedBias(x+"gate_up_proj_bias", seed, g+"ffn_gate_exps.bias", g+"ffn_up_exps.bias", E, H),
			mxSplit(x+"down_proj_blocks", seed, []string{down}, E, D, H, false),
			mxSplit(x+"down_proj_scales", seed, []string{down}, E, D, H, true))
		bf16(x+"down_proj_bias", g+"ffn_down_exps.bias", []int{E, D}, false)
	}
	bf16("model.norm.weight", "model.norm.weight", []int{D}, true)
	bf16("lm_head.weight", "lm_head.weight", []int{s.Vocab, D}, false)
	return ts
}

// mxSplit is one half of an MXFP4 expert stack in gpt-oss's split layout:
// the 16-byte blocks (scales false, shape [experts × rows·len(parts) ×
// cols/32 × 16]) or the E8M0 scales ([experts × rows·len(parts) ×
// cols/32]). The values are fillMXFP4's for each part's GGUF tensor (same
// draws, same order); with two parts (gate, up) their rows alternate.
func mxSplit(name string, seed int64, parts []string, experts, rows, cols int, scales bool) hfTensor {
	nb := cols / quant.MXFP4Block // blocks per row
	shape := []int{experts, rows * len(parts), nb, 16}
	dtypeShape := shape
	if scales {
		dtypeShape = shape[:3]
	}
	return hfTensor{safetensors.Tensor{Name: name, DType: "U8", Shape: dtypeShape}, func(w io.Writer) error {
		rngs := make([]*rand.Rand, len(parts))
		for i, p := range parts {
			rngs[i] = seeded(seed, p)
		}
		per := 16
		if scales {
			per = 1
		}
		buf := make([]byte, 0, nb*per)
		var blk [quant.MXFP4BlockBytes]byte
		for range experts * rows {
			for _, rng := range rngs {
				buf = buf[:0]
				for range nb {
					x, y := rng.Uint64(), rng.Uint64()
					if scales {
						buf = append(buf, byte(119+y>>63)) // as fillMXFP4
						continue
					}
					binary.LittleEndian.PutUint64(blk[1:], x)
					binary.LittleEndian.PutUint64(blk[9:], y)
					buf = appendSplitBlock(buf, blk[1:])
				}
				if _, err := w.Write(buf); err != nil {
					return err
				}
			}
		}
		return nil
	}}
}

// appendSplitBlock appends the 16 bytes of one MXFP4 block in gpt-oss's
// order (element i in byte i/2, low nibble when i is even) given its 16
// bytes in ggml's (element j < 16 in the low nibble of byte j, 16+j in the
// high one).
func appendSplitBlock(dst, qs []byte) []byte {
	var v [32]byte
	for j := 0; j < 16; j++ {
		v[j], v[16+j] = qs[j]&0xF, qs[j]>>4
	}
	for i := 0; i < 16; i++ {
		dst = append(dst, v[2*i]|v[2*i+1]<<4)
	}
	return dst
}

// interleavedBias is gate_up_proj_bias [experts × 2·hidden] in BF16: gate
// bias i at column 2i, up bias i at 2i+1, drawn as GenerateReal draws the
// F32 ffn_gate_exps.bias and ffn_up_exps.bias.
func interleavedBias(name string, seed int64, gate, up string, experts, hidden int) hfTensor {
	return hfTensor{safetensors.Tensor{Name: name, DType: "BF16", Shape: []int{experts, 2 * hidden}}, func(w io.Writer) error {
		g, u := seeded(seed, gate), seeded(seed, up)
		buf := make([]byte, 0, 4*hidden)
		for range experts {
			buf = buf[:0]
			for range hidden {
				buf = binary.LittleEndian.AppendUint16(buf, bf16RNE(float32(0.02*g.NormFloat64())))
				buf = binary.LittleEndian.AppendUint16(buf, bf16RNE(float32(0.02*u.NormFloat64())))
			}
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		return nil
	}}
}
