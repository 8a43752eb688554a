package demo

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluice-llm/sluice/modelfile/gguf"
	"github.com/sluice-llm/sluice/modelfile/safetensors"
	"github.com/sluice-llm/sluice/quant"
)

func writeHF(dir, name string, s Shape, ts []tensor, tok *bpeTokenizer) error {
	if err := writeJSON(filepath.Join(dir, "config.json"), config(name, s)); err != nil {
		return err
	}
	st := make([]safetensors.Tensor, 0, len(ts))
	for _, t := range ts {
		shape := []int{t.rows, t.cols}
		if t.rows == 1 {
			shape = []int{t.cols}
		}
		st = append(st, safetensors.Tensor{Name: t.name, DType: "F32", Shape: shape, Data: safetensors.F32Bytes(t.data)})
	}
	return writeFile(filepath.Join(dir, "model.safetensors"), func(f *os.File) error {
		return safetensors.Write(f, st, map[string]string{"format": "pt"})
	})
}

func writeFile(path string, fill func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := fill(f); err != nil {
		f.Close()
		return fmt.Errorf("demo: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("demo: close %s: %w", path, err)
	}
	return nil
}

// ggufNames maps HF tensor name suffixes to llama.cpp's.
var ggufNames = map[string]string{
	"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
	"self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
	"self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
	"mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
}

func writeGGUF(path, name string, s Shape, ts []tensor, tok *bpeTokenizer, q8 bool) error {
	hd := s.Dim / s.Heads
	fileType := uint32(0) // ALL_F32
	if q8 {
		fileType = 7 // MOSTLY_Q8_0
	}
	meta := []gguf.KV{
		{Key: "general.architecture", Value: "llama"},
		{Key: "general.name", Value: name},
		{Key: "general.file_type", Value: fileType},
		{Key: "llama.context_length", Value: uint32(s.MaxPos)},
		{Key: "llama.embedding_length", Value: uint32(s.Dim)},
		{Key: "llama.block_count", Value: uint32(s.Layers)},
		{Key: "llama.feed_forward_length", Value: uint32(s.Hidden)},
		{Key: "llama.rope.dimension_count", Value: uint32(hd)},
		{Key: "llama.attention.head_count", Value: uint32(s.Heads)},
		{Key: "llama.attention.head_count_kv", Value: uint32(s.KVHeads)},
		{Key: "llama.attention.layer_norm_rms_epsilon", Value: float32(normEps)},
		{Key: "llama.rope.freq_base", Value: float32(10000)},
		{Key: "llama.vocab_size", Value: uint32(s.Vocab)},
	}
	meta = append(meta, tokenizerMeta(tok, s.Vocab)...)
	var out []gguf.Tensor
	for _, t := range ts {
		gname := t.name
		data := t.data
		switch t.name {
		case "model.embed_tokens.weight":
			gname = "token_embd.weight"
		case "model.norm.weight":
			gname = "output_norm.weight"
		default:
			var l int
			var rest string
			if _, err := fmt.Sscanf(t.name, "model.layers.%d.%s", &l, &rest); err != nil {
				return fmt.Errorf("demo: unexpected tensor %s", t.name)
			}
			gname = fmt.Sprintf("blk.%d.%s", l, ggufNames[rest])
			switch rest {
			case "self_attn.q_proj.weight":
				data = permuteQK(data, t.rows, t.cols, s.Heads)
			case "self_attn.k_proj.weight":
				data = permuteQK(data, t.rows, t.cols, s.KVHeads)
			}
		}
		gt := gguf.Tensor{Name: gname, Dims: []uint64{uint64(t.cols)}, Type: gguf.TypeF32}
		if t.rows > 1 {
			gt.Dims = append(gt.Dims, uint64(t.rows))
		}
		if q8 && t.rows > 1 && t.cols%32 == 0 {
			gt.Type, gt.Data = gguf.TypeQ8_0, quant.QuantizeQ8_0(data)
		} else {
			gt.Data = gguf.EncodeF32(data)
		}
		out = append(out, gt)
	}
	return writeFile(path, func(f *os.File) error { return gguf.Write(f, meta, out) })
}

// tokenizerMeta is the GGUF metadata of the built-in tokenizer for a
// vocabulary of the given size.
func tokenizerMeta(tok *bpeTokenizer, vocab int) []gguf.KV {
	types := make([]int32, len(tok.tokens))
	for i := range types {
		types[i] = 1 // normal
		if i >= len(tok.tokens)-len(specialTokens) {
			types[i] = 3 // control
		}
	}
	merges := make([]string, len(tok.merges))
	for i, m := range tok.merges {
		merges[i] = m[0] + " " + m[1]
	}
	return []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "gpt2"},
		{Key: "tokenizer.ggml.pre", Value: "gpt-2"},
		{Key: "tokenizer.ggml.tokens", Value: tok.tokens},
		{Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.merges", Value: merges},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(vocab - 4)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(vocab - 3)},
		{Key: "tokenizer.ggml.eot_token_id", Value: uint32(vocab - 1)},
		{Key: "tokenizer.ggml.add_bos_token", Value: false},
		{Key: "tokenizer.chat_template", Value: chatTemplate},
	}
}
