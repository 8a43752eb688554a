// Package demo generates deterministic random-weight Llama models with real
// shapes, so that the quickstart, the tests and the benchmarks need no
// download: `--model demo` serves one. A model is written in Hugging Face
// layout (config.json, generation_config.json, model.safetensors,
// tokenizer.json, tokenizer_config.json with a ChatML chat template) or as
// GGUF (F32 or Q8_0 weights, with the same byte-level BPE vocabulary in its
// metadata).
//
// The tokenizer is real: a GPT-2-style byte-level BPE (256 byte tokens,
// merges learned from a small built-in corpus, padded with synthetic merges
// up to the vocabulary size so that every id decodes) plus the special
// tokens <|begin_of_text|>, <|end_of_text|>, <|im_start|>, <|im_end|>.
//
// The same (shape, seed) gives the same weights in every format; the GGUF
// writer permutes the query and key rows as llama.cpp's converter does, so
// runtimes that follow each format's RoPE convention get the same logits.
package demo

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Shape is a model geometry.
type Shape struct {
	Name                                string
	Dim, Hidden, Layers, Heads, KVHeads int
	Vocab, MaxPos                       int
}

// Shapes are the geometries Generate knows: tiny for tests, and the
// stories15M and stories110M shapes of llama2.c for benchmarks.
var Shapes = map[string]Shape{
	"tiny": {Name: "tiny", Dim: 64, Hidden: 172, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 512, MaxPos: 2048},
	"15m":  {Name: "15m", Dim: 288, Hidden: 768, Layers: 6, Heads: 6, KVHeads: 6, Vocab: 32000, MaxPos: 2048},
	"110m": {Name: "110m", Dim: 768, Hidden: 2048, Layers: 12, Heads: 12, KVHeads: 12, Vocab: 32000, MaxPos: 2048},
	// 1b is TinyLlama-1.1B's shape (GQA 32/4, 1.1B parameters, 4.4 GB in
	// F32): the GPU decode benchmark and serving run (scripts/gpu-run.sh).
	"1b": {Name: "1b", Dim: 2048, Hidden: 5632, Layers: 22, Heads: 32, KVHeads: 4, Vocab: 32000, MaxPos: 2048},
}

// The formats Generate writes.
const (
	FormatHF       = "hf"
	FormatGGUF     = "gguf"
	FormatGGUFQ8_0 = "gguf-q8_0"
)

// GGUFFile is the name of the model file in a GGUF-format demo directory.
const GGUFFile = "model.gguf"

const normEps = 1e-5

// tensor is one generated weight in Hugging Face naming and layout.
type tensor struct {
	name       string
	rows, cols int // rows 1 means a vector
	data       []float32
}

// weights returns the model's tensors, generated deterministically from
// (seed, tensor name): N(0, 0.02²) matrices and norms near 1.
func weights(s Shape, seed int64) []tensor {
	hd := s.Dim / s.Heads
	kv := s.KVHeads * hd
	var ts []tensor
	gen := func(name string, rows, cols int, norm bool) {
		h := fnv.New64a()
		h.Write([]byte(name))
		rng := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
		d := make([]float32, rows*cols)
		for i := range d {
			if norm {
				d[i] = float32(1 + 0.1*rng.NormFloat64())
			} else {
				d[i] = float32(0.02 * rng.NormFloat64())
			}
		}
		ts = append(ts, tensor{name, rows, cols, d})
	}
	gen("model.embed_tokens.weight", s.Vocab, s.Dim, false)
	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		gen(p+"input_layernorm.weight", 1, s.Dim, true)
		gen(p+"self_attn.q_proj.weight", s.Dim, s.Dim, false)
		gen(p+"self_attn.k_proj.weight", kv, s.Dim, false)
		gen(p+"self_attn.v_proj.weight", kv, s.Dim, false)
		gen(p+"self_attn.o_proj.weight", s.Dim, s.Dim, false)
		gen(p+"post_attention_layernorm.weight", 1, s.Dim, true)
		gen(p+"mlp.gate_proj.weight", s.Hidden, s.Dim, false)
		gen(p+"mlp.up_proj.weight", s.Hidden, s.Dim, false)
		gen(p+"mlp.down_proj.weight", s.Dim, s.Hidden, false)
	}
	gen("model.norm.weight", 1, s.Dim, true)
	return ts
}

// Generate writes the demo model of the given shape ("tiny", "15m",
// "110m") and seed into dir (created if needed) in format "hf", "gguf" or
// "gguf-q8_0". Tokenizer files are written in every format.
func Generate(dir, shape string, seed int64, format string) error {
	s, ok := Shapes[shape]
	if !ok {
		return fmt.Errorf("demo: unknown shape %q (known: tiny, 15m, 110m, 1b)", shape)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	tok := buildTokenizer(s.Vocab)
	name := fmt.Sprintf("demo-%s-%d", shape, seed)
	ts := weights(s, seed)
	var err error
	switch format {
	case FormatHF, "":
		err = writeHF(dir, name, s, ts, tok)
	case FormatGGUF, FormatGGUFQ8_0:
		err = writeGGUF(filepath.Join(dir, GGUFFile), name, s, ts, tok, format == FormatGGUFQ8_0)
	default:
		return fmt.Errorf("demo: unknown format %q (known: hf, gguf, gguf-q8_0)", format)
	}
	if err != nil {
		return err
	}
	return writeTokenizer(dir, s, tok)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("demo: encode %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}

func writeTokenizer(dir string, s Shape, tok *bpeTokenizer) error {
	tj, err := tok.tokenizerJSON()
	if err != nil {
		return fmt.Errorf("demo: tokenizer.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tj, 0o644); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	tc, err := tok.tokenizerConfigJSON()
	if err != nil {
		return fmt.Errorf("demo: tokenizer_config.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), tc, 0o644); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	bos, eot, imEnd := s.Vocab-4, s.Vocab-3, s.Vocab-1
	return writeJSON(filepath.Join(dir, "generation_config.json"), map[string]any{
		"bos_token_id": bos, "eos_token_id": []int{eot, imEnd}, "do_sample": false,
	})
}

// config returns config.json's content.
func config(name string, s Shape) map[string]any {
	return map[string]any{
		"_name_or_path":           name,
		"architectures":           []string{"LlamaForCausalLM"},
		"model_type":              "llama",
		"hidden_size":             s.Dim,
		"intermediate_size":       s.Hidden,
		"num_hidden_layers":       s.Layers,
		"num_attention_heads":     s.Heads,
		"num_key_value_heads":     s.KVHeads,
		"head_dim":                s.Dim / s.Heads,
		"hidden_act":              "silu",
		"rms_norm_eps":            normEps,
		"rope_theta":              10000.0,
		"max_position_embeddings": s.MaxPos,
		"vocab_size":              s.Vocab,
		"tie_word_embeddings":     true,
		"attention_bias":          false,
		"bos_token_id":            s.Vocab - 4,
		"eos_token_id":            []int{s.Vocab - 3, s.Vocab - 1},
		"torch_dtype":             "float32",
	}
}

// EnsureCached returns the directory of the HF-layout demo model (shape,
// seed) under the user cache ($XDG_CACHE_HOME/sluice/models or
// ~/.cache/sluice/models), generating it first if absent. Generation goes to
// a temporary directory renamed into place, so a crash or a concurrent
// caller never leaves a half-written model behind.
func EnsureCached(shape string, seed int64) (string, error) {
	return EnsureCachedAs(shape, seed, FormatHF)
}

// EnsureCachedAs is EnsureCached for any format. It returns the path to
// load: the directory for "hf", the .gguf file inside it otherwise.
func EnsureCachedAs(shape string, seed int64, format string) (string, error) {
	if _, ok := Shapes[shape]; !ok {
		return "", fmt.Errorf("demo: unknown shape %q (known: tiny, 15m, 110m, 1b)", shape)
	}
	marker, suffix := "model.safetensors", ""
	switch format {
	case FormatHF, "":
		format = FormatHF
	case FormatGGUF, FormatGGUFQ8_0:
		marker, suffix = GGUFFile, "-"+format
	default:
		return "", fmt.Errorf("demo: unknown format %q (known: hf, gguf, gguf-q8_0)", format)
	}
	root, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("demo: cache dir: %w", err)
	}
	parent := filepath.Join(root, "sluice", "models")
	dir := filepath.Join(parent, fmt.Sprintf("demo-%s-%d%s", shape, seed, suffix))
	result := dir
	if format != FormatHF {
		result = filepath.Join(dir, GGUFFile)
	}
	if _, err := os.Stat(filepath.Join(dir, marker)); err == nil {
		return result, nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("demo: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-demo-*")
	if err != nil {
		return "", fmt.Errorf("demo: %w", err)
	}
	if err := Generate(tmp, shape, seed, format); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(filepath.Join(dir, marker)); serr == nil {
			return result, nil // another process won the race
		}
		return "", fmt.Errorf("demo: install %s: %w", dir, err)
	}
	return result, nil
}

// Resolve maps a --model value naming a demo model ("demo", "demo-tiny",
// "demo-15m", "demo-110m") to its cached directory, generating it if
// needed (seed 0). ok is false, with no error, for any other value.
func Resolve(model string) (dir string, ok bool, err error) {
	shape, isDemo := strings.CutPrefix(model, "demo")
	if !isDemo || (shape != "" && !strings.HasPrefix(shape, "-")) {
		return "", false, nil
	}
	shape = strings.TrimPrefix(shape, "-")
	if shape == "" {
		shape = "tiny"
	}
	dir, err = EnsureCached(shape, 0)
	return dir, true, err
}

// Main implements `engine-core gen-model --out DIR --shape SHAPE --seed N
// [--format FORMAT]`. The small shapes (tiny, 15m, 110m) take hf, gguf or
// gguf-q8_0 as Generate does; the gpt-oss shapes take hf (GenerateHF);
// every shape takes the GGUF formats of GenerateReal, written as
// DIR/model.gguf.
func Main(args []string) error {
	fs := flag.NewFlagSet("gen-model", flag.ContinueOnError)
	out := fs.String("out", "", "output directory (required)")
	shape := fs.String("shape", "tiny", "model shape: "+strings.Join(ShapeNames(), ", "))
	seed := fs.Int64("seed", 0, "random seed of the weights")
	format := fs.String("format", FormatHF, "hf (the small Llama shapes, and the gpt-oss shapes in openai/gpt-oss-20b's published layout), or a GGUF format: "+ggufFormatsList)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("gen-model: --out is required")
	}
	_, small := Shapes[*shape]
	if small && (*format == FormatHF || *format == FormatGGUF || *format == FormatGGUFQ8_0) {
		return Generate(*out, *shape, *seed, *format)
	}
	if *format == FormatHF {
		if rs, ok := RealShapes[*shape]; ok && rs.Arch == "gpt-oss" {
			return GenerateHF(*out, *shape, *seed)
		}
		return fmt.Errorf("gen-model: shape %s is written as GGUF only (--format %s); hf takes tiny, 15m, 110m, 1b and the gpt-oss shapes", *shape, ggufFormatsList)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("gen-model: %w", err)
	}
	return GenerateReal(filepath.Join(*out, GGUFFile), *shape, *seed, *format)
}

func itoa(i int) string { return strconv.Itoa(i) }

// permuteQK reorders the rows of a q or k projection from Hugging Face's
// rotate-half layout to the interleaved layout llama.cpp expects (its
// convert_hf_to_gguf.py LlamaModel.permute): within each head, row
// half*hd/2+j moves to 2j+half.
func permuteQK(w []float32, rows, cols, heads int) []float32 {
	hd := rows / heads
	out := make([]float32, len(w))
	for h := 0; h < heads; h++ {
		for half := 0; half < 2; half++ {
			for j := 0; j < hd/2; j++ {
				src := h*hd + half*hd/2 + j
				dst := h*hd + 2*j + half
				copy(out[dst*cols:(dst+1)*cols], w[src*cols:(src+1)*cols])
			}
		}
	}
	return out
}
