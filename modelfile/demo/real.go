package demo

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/sluice-llm/sluice/modelfile/gguf"
	"github.com/sluice-llm/sluice/modelfile/tokfile"
	"github.com/sluice-llm/sluice/quant"
)

// RealShape is the layer geometry of a published model, for random-weight
// GGUF files that load, run and stream memory like the real thing.
type RealShape struct {
	Name string
	// Arch is the GGUF architecture: "llama", "qwen2" or "qwen3".
	Arch                                string
	Dim, Hidden, Layers, Heads, KVHeads int
	// HeadDim is the width of one head (Qwen3's is not Dim/Heads).
	HeadDim int
	Vocab   int
	MaxPos  int
	// Tied models store one matrix for the embedding and the classifier.
	Tied      bool
	RopeTheta float64
	// NormEps is the RMSNorm epsilon (1e-6 when 0).
	NormEps float32
	// QKVBias adds q/k/v biases (Qwen2); QKNorm adds per-head q/k norms
	// (Qwen3).
	QKVBias, QKNorm bool

	// Mixture of experts (Arch "gpt-oss" or "qwen3moe"): every layer's
	// feed-forward block is Experts experts of ExpertHidden, TopK per
	// token, stored as llama.cpp does (3-D ffn_*_exps tensors, router
	// ffn_gate_inp). gpt-oss adds attention and expert biases, sinks,
	// SlidingWindow on every other layer and YaRN (YaRNFactor over
	// YaRNOrigPos).
	Experts, TopK, ExpertHidden int
	SlidingWindow               int
	YaRNFactor                  float64
	YaRNOrigPos                 int
	// TokenizerVocab, when set, sizes the built-in tokenizer written into
	// the file below Vocab (gpt-oss files are served with
	// --tokenizer o200k_harmony, and building a 201088-token BPE takes a
	// CPU-minute); the file then names o200k_harmony's stop tokens
	// <|return|> (200002) and <|call|> (200012) as EOS and EOT.
	TokenizerVocab int
}

// RealShapes are the published geometries gen-model writes. "1b-v32k" is
// Llama-3.2-1B's layers with Llama-2's 32000-token vocabulary (issue 17's
// baseline file).
var RealShapes = map[string]RealShape{
	"llama3.2-1b":  {Name: "llama3.2-1b", Arch: "llama", Dim: 2048, Hidden: 8192, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64, Vocab: 128256, MaxPos: 131072, Tied: true, RopeTheta: 500000},
	"1b-v32k":      {Name: "1b-v32k", Arch: "llama", Dim: 2048, Hidden: 8192, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64, Vocab: 32000, MaxPos: 131072, Tied: true, RopeTheta: 500000},
	"llama3.2-3b":  {Name: "llama3.2-3b", Arch: "llama", Dim: 3072, Hidden: 8192, Layers: 28, Heads: 24, KVHeads: 8, HeadDim: 128, Vocab: 128256, MaxPos: 131072, Tied: true, RopeTheta: 500000},
	"llama3.1-8b":  {Name: "llama3.1-8b", Arch: "llama", Dim: 4096, Hidden: 14336, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 128256, MaxPos: 131072, RopeTheta: 500000},
	"qwen2.5-0.5b": {Name: "qwen2.5-0.5b", Arch: "qwen2", Dim: 896, Hidden: 4864, Layers: 24, Heads: 14, KVHeads: 2, HeadDim: 64, Vocab: 151936, MaxPos: 32768, Tied: true, RopeTheta: 1e6, QKVBias: true},
	"qwen2.5-1.5b": {Name: "qwen2.5-1.5b", Arch: "qwen2", Dim: 1536, Hidden: 8960, Layers: 28, Heads: 12, KVHeads: 2, HeadDim: 128, Vocab: 151936, MaxPos: 32768, Tied: true, RopeTheta: 1e6, QKVBias: true},
	"qwen3-0.6b":   {Name: "qwen3-0.6b", Arch: "qwen3", Dim: 1024, Hidden: 3072, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128, Vocab: 151936, MaxPos: 40960, Tied: true, RopeTheta: 1e6, QKNorm: true},
	"qwen3-1.7b":   {Name: "qwen3-1.7b", Arch: "qwen3", Dim: 2048, Hidden: 6144, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128, Vocab: 151936, MaxPos: 40960, Tied: true, RopeTheta: 1e6, QKNorm: true},
	// openai/gpt-oss-20b's config.json
	"gpt-oss-20b": {Name: "gpt-oss-20b", Arch: "gpt-oss", Dim: 2880, Hidden: 2880, Layers: 24, Heads: 64, KVHeads: 8, HeadDim: 64, Vocab: 201088,
		MaxPos: 131072, RopeTheta: 150000, NormEps: 1e-5, QKVBias: true, Experts: 32, TopK: 4, ExpertHidden: 2880, SlidingWindow: 128,
		YaRNFactor: 32, YaRNOrigPos: 4096, TokenizerVocab: 1024},
	// Qwen/Qwen3-30B-A3B's config.json
	"qwen3-30b-a3b": {Name: "qwen3-30b-a3b", Arch: "qwen3moe", Dim: 2048, Hidden: 6144, Layers: 48, Heads: 32, KVHeads: 4, HeadDim: 128, Vocab: 151936,
		MaxPos: 40960, RopeTheta: 1e6, QKNorm: true, Experts: 128, TopK: 8, ExpertHidden: 768},
	// tiny variants of both, for tests and the served e2e (gpt-oss keeps
	// o200k_harmony's vocabulary so that its tokenizer fits)
	"gpt-oss-tiny": {Name: "gpt-oss-tiny", Arch: "gpt-oss", Dim: 64, Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 201088,
		MaxPos: 4096, RopeTheta: 150000, NormEps: 1e-5, QKVBias: true, Experts: 4, TopK: 2, ExpertHidden: 64, SlidingWindow: 8,
		YaRNFactor: 32, YaRNOrigPos: 128, TokenizerVocab: 1024},
	"qwen3-moe-tiny": {Name: "qwen3-moe-tiny", Arch: "qwen3moe", Dim: 256, Hidden: 512, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, Vocab: 1024,
		MaxPos: 4096, RopeTheta: 1e6, QKNorm: true, Experts: 8, TopK: 2, ExpertHidden: 256},
}

// FileType is a GGUF file's weight format (llama.cpp's llama_ftype).
type FileType struct {
	// Name is the --format value ("gguf-q4_k_m").
	Name string
	// ID is general.file_type.
	ID uint32
}

// The GGUF formats gen-model writes, beyond FormatGGUF (F32) and
// FormatGGUFQ8_0.
const (
	FormatGGUFF16  = "gguf-f16"
	FormatGGUFBF16 = "gguf-bf16"
	FormatGGUFQ4_0 = "gguf-q4_0"
	FormatGGUFQ4KM = "gguf-q4_k_m"
	FormatGGUFQ5KM = "gguf-q5_k_m"
	FormatGGUFQ6K  = "gguf-q6_k"
	// FormatGGUFMXFP4 is gpt-oss's published GGUF: experts MXFP4, other
	// matrices BF16, vectors F32.
	FormatGGUFMXFP4 = "gguf-mxfp4"
	ggufFormatsList = "gguf (F32), gguf-f16, gguf-bf16, gguf-q8_0, gguf-q4_0, gguf-q4_k_m, gguf-q5_k_m, gguf-q6_k, gguf-mxfp4"
)

// fileTypes maps each GGUF format to general.file_type.
var fileTypes = map[string]uint32{
	FormatGGUF: 0, FormatGGUFF16: 1, FormatGGUFQ4_0: 2, FormatGGUFQ8_0: 7,
	FormatGGUFQ4KM: 15, FormatGGUFQ5KM: 17, FormatGGUFQ6K: 18, FormatGGUFBF16: 32, FormatGGUFMXFP4: 38,
}

// useMoreBits is llama.cpp's use_more_bits: the layers whose attn_v and
// ffn_down a _M k-quant file stores at Q6_K.
func useMoreBits(layer, layers int) bool {
	return layer < layers/8 || layer >= 7*layers/8 || (layer-layers/8)%3 == 2
}

// tensorType picks a matrix's type in a file of the given format the way
// llama.cpp's llama-quantize does (simplified): the classifier (the
// embedding table when tied) at Q6_K in k-quant and Q4_0 files; attn_v and
// ffn_down of some layers at Q6_K in _M files; a k-quant tensor whose rows
// are not a multiple of 256 falls back to Q8_0.
func tensorType(format, ggufName string, layer, layers int, cols int, tied bool) gguf.GGMLType {
	var t gguf.GGMLType
	if ggufName == "ffn_gate_inp" || strings.HasSuffix(ggufName, ".ffn_gate_inp.weight") {
		return gguf.TypeF32 // llama-quantize keeps routers at F32
	}
	switch format {
	case FormatGGUFMXFP4:
		if strings.Contains(ggufName, "_exps.") {
			return gguf.TypeMXFP4
		}
		return gguf.TypeBF16
	case FormatGGUF:
		return gguf.TypeF32
	case FormatGGUFF16:
		return gguf.TypeF16
	case FormatGGUFBF16:
		return gguf.TypeBF16
	case FormatGGUFQ8_0:
		return gguf.TypeQ8_0
	case FormatGGUFQ4_0:
		t = gguf.TypeQ4_0
	case FormatGGUFQ4KM:
		t = gguf.TypeQ4_K
	case FormatGGUFQ5KM:
		t = gguf.TypeQ5_K
	case FormatGGUFQ6K:
		t = gguf.TypeQ6_K
	}
	classifier := ggufName == "output.weight" || (tied && ggufName == "token_embd.weight")
	switch {
	case classifier:
		t = gguf.TypeQ6_K
	case (format == FormatGGUFQ4KM || format == FormatGGUFQ5KM) &&
		(strings.HasSuffix(ggufName, ".attn_v.weight") || strings.HasSuffix(ggufName, ".ffn_down.weight") ||
			strings.HasSuffix(ggufName, ".ffn_down_exps.weight")) &&
		useMoreBits(layer, layers):
		t = gguf.TypeQ6_K
	}
	if t != gguf.TypeQ4_0 && cols%quant.QKBlock != 0 {
		t = gguf.TypeQ8_0
	}
	return t
}

// realTensor is one tensor of a RealShape file: its GGUF name, shape,
// type, and how to fill it.
type realTensor struct {
	name       string // GGUF name
	hfName     string // Hugging Face name: seeds the generator
	rows, cols int
	typ        gguf.GGMLType
	norm       bool
	// permuteHeads > 0: q/k rows are permuted to llama.cpp's interleaved
	// RoPE layout (llama architecture).
	permuteHeads int
	// experts > 0 makes a 3-D tensor of experts [rows × cols] matrices.
	experts int
}

func realTensors(s RealShape, format string) []realTensor {
	var ts []realTensor
	layer := -1
	add := func(gname, hname string, rows, cols int, norm bool, permute int) {
		t := realTensor{name: gname, hfName: hname, rows: rows, cols: cols, norm: norm, permuteHeads: permute, typ: gguf.TypeF32}
		if rows > 1 {
			t.typ = tensorType(format, gname, layer, s.Layers, cols, s.Tied)
		}
		ts = append(ts, t)
	}
	q, kv := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
	add("token_embd.weight", "model.embed_tokens.weight", s.Vocab, s.Dim, false, 0)
	for l := 0; l < s.Layers; l++ {
		layer = l
		g, h := fmt.Sprintf("blk.%d.", l), fmt.Sprintf("model.layers.%d.", l)
		pq, pk := 0, 0
		if s.Arch == "llama" {
			pq, pk = s.Heads, s.KVHeads
		}
		add(g+"attn_norm.weight", h+"input_layernorm.weight", 1, s.Dim, true, 0)
		add(g+"attn_q.weight", h+"self_attn.q_proj.weight", q, s.Dim, false, pq)
		add(g+"attn_k.weight", h+"self_attn.k_proj.weight", kv, s.Dim, false, pk)
		add(g+"attn_v.weight", h+"self_attn.v_proj.weight", kv, s.Dim, false, 0)
		if s.QKVBias {
			add(g+"attn_q.bias", h+"self_attn.q_proj.bias", 1, q, false, 0)
			add(g+"attn_k.bias", h+"self_attn.k_proj.bias", 1, kv, false, 0)
			add(g+"attn_v.bias", h+"self_attn.v_proj.bias", 1, kv, false, 0)
		}
		if s.QKNorm {
			add(g+"attn_q_norm.weight", h+"self_attn.q_norm.weight", 1, s.HeadDim, true, 0)
			add(g+"attn_k_norm.weight", h+"self_attn.k_norm.weight", 1, s.HeadDim, true, 0)
		}
		add(g+"attn_output.weight", h+"self_attn.o_proj.weight", s.Dim, q, false, 0)
		if s.Experts > 0 {
			ts = append(ts, moeTensors(s, format, l)...)
			continue
		}
		add(g+"ffn_norm.weight", h+"post_attention_layernorm.weight", 1, s.Dim, true, 0)
		add(g+"ffn_gate.weight", h+"mlp.gate_proj.weight", s.Hidden, s.Dim, false, 0)
		add(g+"ffn_up.weight", h+"mlp.up_proj.weight", s.Hidden, s.Dim, false, 0)
		add(g+"ffn_down.weight", h+"mlp.down_proj.weight", s.Dim, s.Hidden, false, 0)
	}
	layer = -1
	add("output_norm.weight", "model.norm.weight", 1, s.Dim, true, 0)
	if !s.Tied {
		add("output.weight", "lm_head.weight", s.Vocab, s.Dim, false, 0)
	}
	return ts
}

// moeTensors are layer l's tensors after attn_output in a gpt-oss or
// qwen3moe file, with llama.cpp's names.
func moeTensors(s RealShape, format string, l int) []realTensor {
	g := fmt.Sprintf("blk.%d.", l)
	var ts []realTensor
	add := func(name string, experts, rows, cols int, norm bool) {
		t := realTensor{name: g + name, hfName: g + name, rows: rows, cols: cols, norm: norm, experts: experts, typ: gguf.TypeF32}
		if rows > 1 && !strings.HasSuffix(name, ".bias") {
			t.typ = tensorType(format, t.name, l, s.Layers, cols, s.Tied)
		}
		ts = append(ts, t)
	}
	gpt := s.Arch == "gpt-oss"
	if gpt {
		add("attn_output.bias", 0, 1, s.Dim, false)
		add("attn_sinks.weight", 0, 1, s.Heads, false)
		add("post_attention_norm.weight", 0, 1, s.Dim, true)
	} else {
		add("ffn_norm.weight", 0, 1, s.Dim, true)
	}
	add("ffn_gate_inp.weight", 0, s.Experts, s.Dim, false)
	if gpt {
		add("ffn_gate_inp.bias", 0, 1, s.Experts, false)
	}
	add("ffn_gate_exps.weight", s.Experts, s.ExpertHidden, s.Dim, false)
	add("ffn_up_exps.weight", s.Experts, s.ExpertHidden, s.Dim, false)
	add("ffn_down_exps.weight", s.Experts, s.Dim, s.ExpertHidden, false)
	if gpt {
		add("ffn_gate_exps.bias", 0, s.Experts, s.ExpertHidden, false)
		add("ffn_up_exps.bias", 0, s.Experts, s.ExpertHidden, false)
		add("ffn_down_exps.bias", 0, s.Experts, s.Dim, false)
	}
	return ts
}

// fillMXFP4 writes n random MXFP4 values (ggml blocks) to w: uniform FP4
// codes under an E8M0 scale of 2^-7 or 2^-8, a spread like the N(0, 0.02²)
// other weights get, drawn as bytes rather than quantized from normals
// (quantizing gpt-oss-20b's 19.6 billion expert values would take a
// CPU-hour).
func fillMXFP4(w io.Writer, rng *rand.Rand, n int) error {
	const chunkBlocks = 1 << 14
	buf := make([]byte, chunkBlocks*quant.MXFP4BlockBytes)
	for left := n / quant.MXFP4Block; left > 0; {
		nb := min(left, chunkBlocks)
		out := buf[:nb*quant.MXFP4BlockBytes]
		for b := 0; b < nb; b++ {
			blk := out[b*quant.MXFP4BlockBytes : (b+1)*quant.MXFP4BlockBytes]
			x, y := rng.Uint64(), rng.Uint64()
			binary.LittleEndian.PutUint64(blk[1:], x)
			binary.LittleEndian.PutUint64(blk[9:], y)
			blk[0] = byte(119 + y>>63) // E8M0: 2^-8 or 2^-7
		}
		if _, err := w.Write(out); err != nil {
			return err
		}
		left -= nb
	}
	return nil
}

// fillKQuant writes n random Q4_K or Q6_K values: random quants and
// sub-block scales under a fixed super-block scale that gives a spread like
// N(0, 0.02²), drawn as bytes (quantizing a 30 B-parameter MoE's experts
// from normals would take a CPU-hour). Only expert stacks are drawn so.
func fillKQuant(w io.Writer, rng *rand.Rand, typ gguf.GGMLType, n int) error {
	bb := int(typ.BlockBytes())
	const chunkBlocks = 1 << 12
	buf := make([]byte, chunkBlocks*bb)
	for left := n / quant.QKBlock; left > 0; {
		nb := min(left, chunkBlocks)
		out := buf[:nb*bb]
		for i := 0; i+8 <= len(out); i += 8 {
			binary.LittleEndian.PutUint64(out[i:], rng.Uint64())
		}
		for b := 0; b < nb; b++ {
			blk := out[b*bb : (b+1)*bb]
			if typ == gguf.TypeQ4_K { // d, dmin first
				binary.LittleEndian.PutUint16(blk[0:], quant.F32ToF16(5e-5))
				binary.LittleEndian.PutUint16(blk[2:], quant.F32ToF16(5e-4))
			} else { // Q6_K: d last
				binary.LittleEndian.PutUint16(blk[bb-2:], quant.F32ToF16(5e-6))
			}
		}
		if _, err := w.Write(out); err != nil {
			return err
		}
		left -= nb
	}
	return nil
}

// encodeRows appends rows of xs encoded as typ.
func encodeRows(dst []byte, typ gguf.GGMLType, xs []float32) []byte {
	switch typ {
	case gguf.TypeF16:
		for _, v := range xs {
			dst = binary.LittleEndian.AppendUint16(dst, quant.F32ToF16(v))
		}
	case gguf.TypeBF16:
		for _, v := range xs {
			dst = binary.LittleEndian.AppendUint16(dst, bf16RNE(v))
		}
	case gguf.TypeQ8_0:
		dst = append(dst, quant.QuantizeQ8_0(xs)...)
	case gguf.TypeMXFP4:
		dst = append(dst, quant.QuantizeMXFP4(xs)...)
	case gguf.TypeQ4_0:
		dst = quant.AppendQ4_0(dst, xs)
	case gguf.TypeQ4_K:
		dst = quant.AppendQ4K(dst, xs)
	case gguf.TypeQ5_K:
		dst = quant.AppendQ5K(dst, xs)
	case gguf.TypeQ6_K:
		dst = quant.AppendQ6K(dst, xs)
	default:
		for _, v := range xs {
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
		}
	}
	return dst
}

// bf16RNE rounds a float32 to bfloat16, to nearest even.
func bf16RNE(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40 // quiet NaN
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// GenerateReal writes a random-weight GGUF file of a published shape (or
// of one of Shapes) to path in one of the GGUF formats, streaming tensor by tensor (an 8B F16
// file never sits in memory). Weights are N(0, 0.02²), norms near 1,
// drawn per tensor from (seed, tensor name) as Generate's are. The
// vocabulary is the built-in byte-level BPE padded to the shape's size.
func GenerateReal(path, shape string, seed int64, format string) error {
	s, ok := RealShapes[shape]
	if small, isSmall := Shapes[shape]; isSmall {
		s, ok = RealShape{Name: small.Name, Arch: "llama", Dim: small.Dim, Hidden: small.Hidden, Layers: small.Layers,
			Heads: small.Heads, KVHeads: small.KVHeads, HeadDim: small.Dim / small.Heads, Vocab: small.Vocab,
			MaxPos: small.MaxPos, Tied: true, RopeTheta: 10000, NormEps: normEps}, true
	}
	if !ok {
		return fmt.Errorf("demo: unknown shape %q (known: %s)", shape, strings.Join(ShapeNames(), ", "))
	}
	return GenerateShape(path, s, seed, format)
}

// GenerateShape is GenerateReal for any geometry.
func GenerateShape(path string, s RealShape, seed int64, format string) error {
	if s.NormEps == 0 {
		s.NormEps = 1e-6
	}
	ftype, ok := fileTypes[format]
	if !ok {
		return fmt.Errorf("demo: format %q is not a GGUF format (known: %s)", format, ggufFormatsList)
	}
	tokVocab := s.Vocab
	if s.TokenizerVocab > 0 {
		tokVocab = s.TokenizerVocab
	}
	tok := buildTokenizer(tokVocab)
	ts := realTensors(s, format)
	a := s.Arch
	meta := []gguf.KV{
		{Key: "general.architecture", Value: a},
		{Key: "general.name", Value: fmt.Sprintf("%s-%s-random-%d", s.Name, strings.TrimPrefix(format, "gguf-"), seed)},
		{Key: "general.file_type", Value: ftype},
		{Key: a + ".context_length", Value: uint32(s.MaxPos)},
		{Key: a + ".embedding_length", Value: uint32(s.Dim)},
		{Key: a + ".block_count", Value: uint32(s.Layers)},
		{Key: a + ".feed_forward_length", Value: uint32(s.Hidden)},
		{Key: a + ".rope.dimension_count", Value: uint32(s.HeadDim)},
		{Key: a + ".attention.head_count", Value: uint32(s.Heads)},
		{Key: a + ".attention.head_count_kv", Value: uint32(s.KVHeads)},
		{Key: a + ".attention.key_length", Value: uint32(s.HeadDim)},
		{Key: a + ".attention.value_length", Value: uint32(s.HeadDim)},
		{Key: a + ".attention.layer_norm_rms_epsilon", Value: s.NormEps},
		{Key: a + ".rope.freq_base", Value: float32(s.RopeTheta)},
		{Key: a + ".vocab_size", Value: uint32(s.Vocab)},
	}
	if s.Experts > 0 {
		meta = append(meta,
			gguf.KV{Key: a + ".expert_count", Value: uint32(s.Experts)},
			gguf.KV{Key: a + ".expert_used_count", Value: uint32(s.TopK)},
			gguf.KV{Key: a + ".expert_feed_forward_length", Value: uint32(s.ExpertHidden)})
	}
	if s.SlidingWindow > 0 {
		meta = append(meta, gguf.KV{Key: a + ".attention.sliding_window", Value: uint32(s.SlidingWindow)})
	}
	if s.YaRNFactor > 0 {
		meta = append(meta,
			gguf.KV{Key: a + ".rope.scaling.type", Value: "yarn"},
			gguf.KV{Key: a + ".rope.scaling.factor", Value: float32(s.YaRNFactor)},
			gguf.KV{Key: a + ".rope.scaling.original_context_length", Value: uint32(s.YaRNOrigPos)})
	}
	for _, kv := range tokenizerMeta(tok, tokVocab) {
		if s.TokenizerVocab > 0 {
			switch kv.Key {
			case "tokenizer.ggml.tokens", "tokenizer.ggml.token_type":
				kv.Value = padVocab(kv.Value, s.Vocab)
			case "tokenizer.ggml.eos_token_id":
				kv.Value = uint32(200002) // <|return|>
			case "tokenizer.ggml.eot_token_id":
				kv.Value = uint32(200012) // <|call|>
			}
		}
		meta = append(meta, kv)
	}
	infos := make([]gguf.Tensor, len(ts))
	for i, t := range ts {
		infos[i] = gguf.Tensor{Name: t.name, Dims: []uint64{uint64(t.cols)}, Type: t.typ}
		if t.rows > 1 {
			infos[i].Dims = append(infos[i].Dims, uint64(t.rows))
		}
		if t.experts > 0 {
			infos[i].Dims = append(infos[i].Dims, uint64(t.experts))
		}
	}
	var buf []byte
	fill := func(i int, w io.Writer) error {
		t := ts[i]
		h := fnv.New64a()
		h.Write([]byte(t.hfName))
		rng := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
		next := func() float32 {
			if t.norm {
				return float32(1 + 0.1*rng.NormFloat64())
			}
			return float32(0.02 * rng.NormFloat64())
		}
		if t.permuteHeads > 0 {
			// the permutation moves whole rows within a head: generate a
			// head at a time
			hd := t.rows / t.permuteHeads
			head := make([]float32, hd*t.cols)
			for range t.permuteHeads {
				for j := range head {
					head[j] = next()
				}
				buf = encodeRows(buf[:0], t.typ, permuteQK(head, hd, t.cols, 1))
				if _, err := w.Write(buf); err != nil {
					return err
				}
			}
			return nil
		}
		if t.typ == gguf.TypeMXFP4 {
			return fillMXFP4(w, rng, t.rows*max(t.experts, 1)*t.cols)
		}
		if t.experts > 0 && (t.typ == gguf.TypeQ4_K || t.typ == gguf.TypeQ6_K) {
			return fillKQuant(w, rng, t.typ, t.rows*t.experts*t.cols)
		}
		const chunkRows = 64
		rows := t.rows * max(t.experts, 1)
		row := make([]float32, min(chunkRows, rows)*t.cols)
		for r := 0; r < rows; r += chunkRows {
			n := min(chunkRows, rows-r)
			xs := row[:n*t.cols]
			for j := range xs {
				xs[j] = next()
			}
			buf = encodeRows(buf[:0], t.typ, xs)
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		return nil
	}
	return writeFile(path, func(f *os.File) error { return gguf.WriteStream(f, meta, infos, fill) })
}

// padVocab extends the built-in tokenizer's token list (or its types) to
// the embedding's rows as llama.cpp's convert_hf_to_gguf.py pads a
// vocabulary smaller than the model's: id i becomes "[PAD<i>]" of type
// unused. llama.cpp takes the list's length as the vocabulary size and
// refuses a token_embd of another height.
func padVocab(v any, vocab int) any {
	switch v := v.(type) {
	case []string:
		for i := len(v); i < vocab; i++ {
			v = append(v, fmt.Sprintf("[PAD%d]", i))
		}
		return v
	case []int32:
		for len(v) < vocab {
			v = append(v, tokfile.TokenTypeUnused)
		}
		return v
	}
	return v
}

// ShapeNames lists every shape Generate and GenerateReal know.
func ShapeNames() []string {
	names := []string{"tiny", "15m", "110m", "1b"}
	for _, n := range []string{"1b-v32k", "llama3.2-1b", "llama3.2-3b", "llama3.1-8b", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen3-0.6b", "qwen3-1.7b",
		"gpt-oss-20b", "qwen3-30b-a3b", "gpt-oss-tiny", "qwen3-moe-tiny"} {
		if _, ok := RealShapes[n]; ok {
			names = append(names, n)
		}
	}
	return names
}
