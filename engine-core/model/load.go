package model

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/modelfile/gguf"
	"github.com/sluice-llm/sluice/modelfile/hfconfig"
	"github.com/sluice-llm/sluice/modelfile/llama2c"
	"github.com/sluice-llm/sluice/modelfile/safetensors"
	"github.com/sluice-llm/sluice/quant"
)

// LoadOptions tune Load.
type LoadOptions struct {
	// MaxPos caps the context length (and the RoPE table); 0 keeps the
	// model's own.
	MaxPos int
}

// rawTensor is a tensor as a file stores it: its encoding ("F32", "F16",
// "BF16", "Q8_0"), its shape as [rows, cols] (rows = output features),
// and its bytes.
type rawTensor struct {
	enc        string
	rows, cols int
	data       []byte
	// experts is the leading dimension of a 3-D tensor (a stack of
	// experts' [rows × cols] matrices, back to back), 0 for 2-D.
	experts int
}

// source is one weight file format, addressed by Hugging Face tensor names.
type source interface {
	// get returns the tensor; ok is false when the file has no such tensor.
	get(name string) (t rawTensor, ok bool, err error)
	path() string
	close() error
}

// Format names a weight file format.
type Format string

// The weight formats Load understands.
const (
	FormatHF      Format = "hf"
	FormatGGUF    Format = "gguf"
	FormatLlama2C Format = "llama2c"
)

// DetectFormat says which format path is: a directory with config.json is
// a Hugging Face model, a file starting with "GGUF" is GGUF, any other
// file is taken for a llama2.c checkpoint.
func DetectFormat(path string) (Format, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("model: %w", err)
	}
	if st.IsDir() {
		if _, err := os.Stat(filepath.Join(path, "config.json")); err != nil {
			return "", fmt.Errorf("model: %s is a directory without config.json", path)
		}
		return FormatHF, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("model: %w", err)
	}
	defer f.Close()
	var magic [4]byte
	if _, err := f.Read(magic[:]); err == nil && string(magic[:]) == gguf.Magic {
		return FormatGGUF, nil
	}
	return FormatLlama2C, nil
}

// Load reads a model (Hugging Face directory, .gguf file or llama2.c .bin)
// and uploads its weights to be. F32 weights are used in place from the
// file's memory map where the backend allows; every other matrix is
// passed to the backend in its stored encoding (F16, BF16, Q8_0, Q4_0,
// Q4_K, Q5_K, Q6_K) straight from the memory map.
func Load(path string, be kernels.Backend, opts LoadOptions) (*Model, error) {
	format, err := DetectFormat(path)
	if err != nil {
		return nil, err
	}
	var (
		cfg *Config
		src source
	)
	switch format {
	case FormatHF:
		cfg, src, err = openHF(path)
	case FormatGGUF:
		cfg, src, err = openGGUF(path)
	default:
		cfg, src, err = openLlama2C(path)
	}
	if err != nil {
		return nil, err
	}
	if opts.MaxPos > 0 && opts.MaxPos < cfg.MaxPos {
		cfg.MaxPos = opts.MaxPos
	}
	if err := cfg.validate(); err != nil {
		src.close()
		return nil, fmt.Errorf("model: %s: %w", path, err)
	}
	m, err := build(cfg, src, be)
	if err != nil {
		src.close()
		return nil, err
	}
	return m, nil
}

// ---- Hugging Face ----

type hfSource struct{ m *safetensors.Model }

func openHF(dir string) (*Config, source, error) {
	hc, err := hfconfig.Load(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("model: %w", err)
	}
	if moeFamilyHF(hc.Architectures, hc.ModelType) != "" {
		return openHFMoE(dir, hc)
	}
	arch, err := archFromHF(hc.Architectures, hc.ModelType)
	if err != nil {
		return nil, nil, fmt.Errorf("model: %s: %w", dir, err)
	}
	c := &Config{
		Arch: arch, Name: filepath.Base(filepath.Clean(dir)),
		Dim: hc.HiddenSize, Hidden: hc.IntermediateSize, Layers: hc.NumHiddenLayers,
		Heads: hc.NumAttentionHeads, KVHeads: hc.NumKeyValueHeads, HeadDim: hc.HeadDim, Vocab: hc.VocabSize,
		NormEps: float32(hc.RMSNormEps), RopeTheta: hc.RopeTheta, RopeStyle: kernels.RoPEHalf,
		MaxPos: hc.MaxPositionEmbeddings, Tied: hc.TieWordEmbeddings,
		QKVBias: arch == "qwen2" || hc.AttentionBias, OBias: arch == "llama" && hc.AttentionBias,
		QKNorm: arch == "qwen3", BOS: -1, EOS: hc.EOSTokenIDs,
	}
	if hc.BOSTokenID != nil {
		c.BOS = *hc.BOSTokenID
	}
	if c.MaxPos == 0 {
		c.MaxPos = 2048
	}
	if rs := hc.RopeScaling; rs != nil && rs.Type != "" && rs.Type != "default" {
		c.RopeScaling = &RopeScaling{Type: rs.Type, Factor: rs.Factor, LowFreqFactor: rs.LowFreqFactor,
			HighFreqFactor: rs.HighFreqFactor, OriginalMaxPos: rs.OriginalMaxPositionEmbeddings}
	}
	st, err := safetensors.OpenModel(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("model: %w", err)
	}
	return c, &hfSource{m: st}, nil
}

func (s *hfSource) get(name string) (rawTensor, bool, error) {
	if _, ok := s.m.Tensor(name); !ok {
		return rawTensor{}, false, nil
	}
	b, ti, _, err := s.m.TensorData(name)
	if err != nil {
		return rawTensor{}, true, err
	}
	t := rawTensor{enc: ti.DType, data: b}
	switch len(ti.Shape) {
	case 1:
		t.rows, t.cols = 1, ti.Shape[0]
	case 2:
		t.rows, t.cols = ti.Shape[0], ti.Shape[1]
	case 3:
		t.experts, t.rows, t.cols = ti.Shape[0], ti.Shape[1], ti.Shape[2]
	default:
		return rawTensor{}, true, fmt.Errorf("tensor %s has shape %v, want 1 to 3 dimensions", name, ti.Shape)
	}
	return t, true, nil
}

func (s *hfSource) path() string { return s.m.Dir }
func (s *hfSource) close() error { return s.m.Close() }

// ---- GGUF ----

type ggufSource struct {
	f *gguf.File
	// arch is the file's general.architecture: gpt-oss names the norm
	// before the feed-forward block post_attention_norm.
	arch string
}

// ggufName maps a Hugging Face tensor name to llama.cpp's.
func ggufName(name string) string {
	switch name {
	case "model.embed_tokens.weight":
		return "token_embd.weight"
	case "model.norm.weight":
		return "output_norm.weight"
	case "lm_head.weight":
		return "output.weight"
	}
	var layer int
	var rest string
	if n, _ := fmt.Sscanf(name, "model.layers.%d.%s", &layer, &rest); n != 2 {
		return name
	}
	if rest == "self_attn.sinks" {
		return fmt.Sprintf("blk.%d.attn_sinks.weight", layer)
	}
	for hf, gg := range map[string]string{
		// mixture of experts: the router, and the experts' matrices stacked
		// into one 3-D tensor each (names as loadExperts asks for them)
		"mlp.router": "ffn_gate_inp", "mlp.gate": "ffn_gate_inp",
		"mlp.experts.gate_proj": "ffn_gate_exps", "mlp.experts.up_proj": "ffn_up_exps", "mlp.experts.down_proj": "ffn_down_exps",

		"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
		"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
		"self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
		"mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
	} {
		if suffix, ok := strings.CutPrefix(rest, hf+"."); ok {
			return fmt.Sprintf("blk.%d.%s.%s", layer, gg, suffix)
		}
	}
	return name
}

func openGGUF(path string) (*Config, source, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("model: %w", err)
	}
	arch := f.Arch()
	c := &Config{Arch: arch, BOS: -1}
	switch arch {
	case "llama":
		c.RopeStyle = kernels.RoPEInterleaved // llama.cpp's converter permuted q/k
	case "qwen2", "qwen3", "qwen3moe", "gpt-oss":
		c.RopeStyle = kernels.RoPEHalf
		c.QKVBias = arch == "qwen2" || arch == "gpt-oss"
		c.OBias = arch == "gpt-oss"
		c.QKNorm = arch == "qwen3" || arch == "qwen3moe"
	default:
		f.Close()
		return nil, nil, fmt.Errorf("model: %s: unsupported GGUF architecture %q; supported: llama, qwen2, qwen3, qwen3moe, gpt-oss (%s)",
			path, arch, strings.Join(SupportedArchitectures, ", "))
	}
	u := func(key string) int {
		v, _ := f.Meta.Uint(arch + "." + key)
		return int(v)
	}
	c.Dim, c.Hidden, c.Layers = u("embedding_length"), u("feed_forward_length"), u("block_count")
	c.Heads, c.KVHeads, c.MaxPos = u("attention.head_count"), u("attention.head_count_kv"), u("context_length")
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.HeadDim = u("attention.key_length"); c.HeadDim == 0 && c.Heads > 0 {
		c.HeadDim = c.Dim / c.Heads
	}
	eps, _ := f.Meta.Float(arch + ".attention.layer_norm_rms_epsilon")
	c.NormEps = float32(eps)
	if c.RopeTheta, _ = f.Meta.Float(arch + ".rope.freq_base"); c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if st, ok := f.Meta.String(arch + ".rope.scaling.type"); ok && st == "linear" {
		fac, _ := f.Meta.Float(arch + ".rope.scaling.factor")
		c.RopeScaling = &RopeScaling{Type: "linear", Factor: fac}
	}
	if toks, ok := f.Meta.Strings("tokenizer.ggml.tokens"); ok {
		c.Vocab = len(toks)
	}
	if v := u("vocab_size"); v > 0 {
		c.Vocab = v
	}
	if ti, ok := f.Tensor("token_embd.weight"); ok && len(ti.Dims) == 2 {
		c.Vocab = int(ti.Dims[1])
	}
	if v, ok := f.Meta.Uint("tokenizer.ggml.bos_token_id"); ok {
		c.BOS = int32(v)
	}
	if v, ok := f.Meta.Uint("tokenizer.ggml.eos_token_id"); ok {
		c.EOS = []int32{int32(v)}
	}
	if v, ok := f.Meta.Uint("tokenizer.ggml.eot_token_id"); ok && (len(c.EOS) == 0 || int32(v) != c.EOS[0]) {
		c.EOS = append(c.EOS, int32(v))
	}
	// general.name, unless it only repeats the architecture (llama.cpp's
	// llama2.c converter writes "llama"); then the file name says more.
	if name, ok := f.Meta.String("general.name"); ok && name != "" && name != arch {
		c.Name = name
	} else {
		c.Name = strings.TrimSuffix(filepath.Base(path), ".gguf")
	}
	_, hasOut := f.Tensor("output.weight")
	c.Tied = !hasOut
	if arch == "gpt-oss" || arch == "qwen3moe" {
		if c.MoE, err = ggufMoEArch(f, arch, c); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("model: %s: %w", path, err)
		}
	}
	src := &ggufSource{f: f, arch: arch}
	if t, ok, err := src.get("rope_freqs.weight"); ok && err == nil && t.enc == "F32" {
		c.RopeFreqFactors = append([]float32(nil), kernels.BytesToF32(t.data)...)
	}
	return c, src, nil
}

func (s *ggufSource) get(name string) (rawTensor, bool, error) {
	gn := ggufName(name)
	if s.arch == "gpt-oss" {
		gn = strings.Replace(gn, ".ffn_norm.", ".post_attention_norm.", 1)
	}
	if _, ok := s.f.Tensor(gn); !ok {
		return rawTensor{}, false, nil
	}
	b, ti, err := s.f.TensorData(gn)
	if err != nil {
		return rawTensor{}, true, err
	}
	t := rawTensor{enc: ti.Type.String(), data: b}
	switch len(ti.Dims) {
	case 1:
		t.rows, t.cols = 1, int(ti.Dims[0])
	case 2:
		t.rows, t.cols = int(ti.Dims[1]), int(ti.Dims[0])
	case 3:
		t.experts, t.rows, t.cols = int(ti.Dims[2]), int(ti.Dims[1]), int(ti.Dims[0])
	default:
		return rawTensor{}, true, fmt.Errorf("tensor %s has dims %v, want 1 to 3", gn, ti.Dims)
	}
	return t, true, nil
}

func (s *ggufSource) path() string { return s.f.Path }
func (s *ggufSource) close() error { return s.f.Close() }

// ---- llama2.c ----

type l2cSource struct{ f *llama2c.File }

func openLlama2C(path string) (*Config, source, error) {
	f, err := llama2c.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("model: %w", err)
	}
	lc := f.Config
	c := &Config{
		Arch: "llama", Name: strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)),
		Dim: lc.Dim, Hidden: lc.HiddenDim, Layers: lc.Layers, Heads: lc.Heads, KVHeads: lc.KVHeads,
		HeadDim: lc.HeadDim(), Vocab: lc.VocabSize, NormEps: 1e-5, RopeTheta: 10000,
		RopeStyle: kernels.RoPEInterleaved, MaxPos: lc.SeqLen, Tied: lc.SharedClassifier,
		// run.c's generate() stops when BOS (1) is predicted; 2 is </s>.
		BOS: 1, EOS: []int32{1, 2},
	}
	return c, &l2cSource{f: f}, nil
}

func (s *l2cSource) get(name string) (rawTensor, bool, error) {
	t, err := s.f.Tensor(name)
	if err != nil {
		return rawTensor{}, false, nil
	}
	return rawTensor{enc: "F32", rows: t.Rows, cols: t.Cols, data: t.Data}, true, nil
}

func (s *l2cSource) path() string { return s.f.Path }
func (s *l2cSource) close() error { return s.f.Close() }

// ---- upload ----

var errMissing = errors.New("missing")

// storedTypes maps a file's tensor encoding to the backend's DType.
var storedTypes = map[string]kernels.DType{
	"F32": kernels.F32, "F16": kernels.F16, "BF16": kernels.BF16, "Q8_0": kernels.Q8_0,
	"Q4_0": kernels.Q4_0, "Q4_K": kernels.Q4_K, "Q5_K": kernels.Q5_K, "Q6_K": kernels.Q6_K,
	"MXFP4": kernels.MXFP4,
}

// dequantizers decode each non-F32 stored type to float32, for the small
// vectors (norms, biases) that the element-wise ops read as F32, and for
// backends that cannot compute on a stored type (see loadTensor).
var dequantizers = map[kernels.DType]func(out []float32, data []byte){
	kernels.F16:   quant.DequantizeF16,
	kernels.BF16:  quant.DequantizeBF16,
	kernels.Q8_0:  quant.DequantizeQ8_0,
	kernels.Q4_0:  quant.DequantizeQ4_0,
	kernels.Q4_K:  quant.DequantizeQ4K,
	kernels.Q5_K:  quant.DequantizeQ5K,
	kernels.Q6_K:  quant.DequantizeQ6K,
	kernels.MXFP4: quant.DequantizeMXFP4,
}

// blockValues is the number of values per block of a stored type (1 for
// the float types).
func blockValues(dt kernels.DType) int {
	switch dt {
	case kernels.Q8_0, kernels.Q4_0, kernels.MXFP4:
		return kernels.Q8Block
	case kernels.Q4_K, kernels.Q5_K, kernels.Q6_K:
		return quant.QKBlock
	}
	return 1
}

// loadTensor fetches name, checks its shape and uploads it. Matrices are
// passed to the backend as the file stores them (the bytes of the memory
// map: no widened or re-quantized copy). Small vectors (norms, biases,
// rows == 1) are decoded to F32.
//
// owned reports that the backend was given a decoded copy rather than the
// file's bytes (data), so that the loader may drop data's pages from the
// process (see releasePages).
func loadTensor(src source, be kernels.Backend, name string, rows, cols int, optional bool) (out kernels.Tensor, data []byte, owned bool, err error) {
	t, ok, err := src.get(name)
	if err != nil {
		return nil, nil, false, fmt.Errorf("model: %s: tensor %s (want [%d × %d]): %w", src.path(), name, rows, cols, err)
	}
	if !ok {
		if optional {
			return nil, nil, false, nil
		}
		return nil, nil, false, fmt.Errorf("model: %s: tensor %s (want [%d × %d]): %w", src.path(), name, rows, cols, errMissing)
	}
	if t.experts != 0 {
		return nil, nil, false, fmt.Errorf("model: %s: tensor %s has shape [%d × %d × %d], want [%d × %d]", src.path(), name, t.experts, t.rows, t.cols, rows, cols)
	}
	if t.rows != rows || t.cols != cols {
		return nil, nil, false, fmt.Errorf("model: %s: tensor %s has shape [%d × %d], want [%d × %d]", src.path(), name, t.rows, t.cols, rows, cols)
	}
	wrap := func(err error) error {
		return fmt.Errorf("model: %s: tensor %s [%d × %d] %s: %w", src.path(), name, rows, cols, t.enc, err)
	}
	dt, ok := storedTypes[t.enc]
	if !ok {
		return nil, nil, false, wrap(errors.New("unsupported encoding (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)"))
	}
	if bv := blockValues(dt); cols%bv != 0 {
		return nil, nil, false, wrap(fmt.Errorf("%d columns are not a multiple of the %s block (%d values)", cols, dt, bv))
	}
	if want := rows * dt.RowBytes(cols); len(t.data) != want {
		return nil, nil, false, wrap(fmt.Errorf("%d bytes, want %d", len(t.data), want))
	}
	if dt == kernels.F32 {
		if out, err = be.Weight(dt, rows, cols, t.data); err != nil {
			return nil, nil, false, wrap(err)
		}
		return out, t.data, false, nil
	}
	if rows == 1 {
		f := make([]float32, cols)
		dequantizers[dt](f, t.data)
		if out, err = be.WeightF32(rows, cols, f); err != nil {
			return nil, nil, false, wrap(err)
		}
		return out, t.data, true, nil
	}
	if out, err = be.Weight(dt, rows, cols, t.data); err == nil {
		return out, t.data, false, nil
	}
	// A backend without kernels for this type gets the exact values as F32
	// (a decoded copy, 2-8× the file's bytes; no second rounding).
	f := make([]float32, rows*cols)
	dequantizers[dt](f, t.data)
	out, err2 := be.WeightF32(rows, cols, f)
	if err2 != nil {
		return nil, nil, false, wrap(errors.Join(err, err2))
	}
	return out, t.data, true, nil
}

// releasePages tells the kernel that the process no longer needs the
// memory-mapped file pages wholly inside b (madvise MADV_DONTNEED): they
// leave the process's resident set (the page cache may keep them), and a
// later read faults them back in from the file. The loader calls it for
// bytes the backend holds no reference to (a decoded copy, or a packed
// re-layout that replaced them), so that RSS counts each weight once.
func releasePages(b []byte) {
	if len(b) == 0 {
		return
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&b[0]))
	lo := (start + page - 1) &^ (page - 1)
	hi := (start + uintptr(len(b))) &^ (page - 1)
	if hi <= lo {
		return
	}
	off := int(lo - start)
	// Advisory: an error only means the pages stay resident.
	_ = syscall.Madvise(b[off:off+int(hi-lo)], syscall.MADV_DONTNEED)
}

// referencesData reports whether a weight the backend made may still read
// the bytes it was made from (host tensors that dropped them after a
// re-layout, or hold a repacked or copied one, do not; other backends' tensors are
// assumed to).
func referencesData(t kernels.Tensor) bool {
	h, ok := t.(*kernels.Host)
	if !ok {
		return true
	}
	return h.F != nil || (h.Q != nil && !h.Repacked && !h.Copied) || h.H != nil
}

// build uploads every weight the config calls for.
func build(c *Config, src source, be kernels.Backend) (*Model, error) {
	m := &Model{Cfg: *c, be: be, src: src}
	if _, ok := be.(kernels.ExpertOps); c.MoE != nil && !ok {
		return nil, fmt.Errorf("model: %s: the %s backend has no mixture-of-experts ops (kernels.ExpertOps)", src.path(), be.Name())
	}
	var err error
	// the file bytes each matrix was made from, to release once the
	// backend has re-laid the matrix without them
	fileBytes := map[kernels.Tensor][]byte{}
	get := func(name string, rows, cols int, optional bool) kernels.Tensor {
		if err != nil {
			return nil
		}
		t, data, owned, lerr := loadTensor(src, be, name, rows, cols, optional)
		if err = lerr; t == nil || err != nil {
			return nil
		}
		m.weightBytes += int64(len(data))
		if owned {
			// a decoded copy: the process's own memory from here on
			m.copiedBytes += int64(len(data))
			releasePages(data)
		} else {
			fileBytes[t] = data
		}
		return t
	}
	// A tied model may store its one matrix under either name
	// (transformers loads both): the embedding table or lm_head.weight.
	m.Embed = get("model.embed_tokens.weight", c.Vocab, c.Dim, c.Tied)
	if c.Tied && m.Embed == nil && err == nil {
		m.Embed = get("lm_head.weight", c.Vocab, c.Dim, true)
		if m.Embed == nil && err == nil {
			err = fmt.Errorf("model: %s: tied embeddings: neither model.embed_tokens.weight nor lm_head.weight (want [%d × %d]): %w",
				src.path(), c.Vocab, c.Dim, errMissing)
		}
	}
	m.Norm = get("model.norm.weight", 1, c.Dim, false)
	if c.Tied {
		m.LMHead = m.Embed
	} else {
		m.LMHead = get("lm_head.weight", c.Vocab, c.Dim, false)
	}
	m.Layers = make([]Layer, c.Layers)
	for i := range m.Layers {
		L := &m.Layers[i]
		p := fmt.Sprintf("model.layers.%d.", i)
		L.AttnNorm = get(p+"input_layernorm.weight", 1, c.Dim, false)
		L.Wq = get(p+"self_attn.q_proj.weight", c.QDim(), c.Dim, false)
		L.Wk = get(p+"self_attn.k_proj.weight", c.KVDim(), c.Dim, false)
		L.Wv = get(p+"self_attn.v_proj.weight", c.KVDim(), c.Dim, false)
		L.Wo = get(p+"self_attn.o_proj.weight", c.Dim, c.QDim(), false)
		if c.QKVBias {
			L.Bq = get(p+"self_attn.q_proj.bias", 1, c.QDim(), false)
			L.Bk = get(p+"self_attn.k_proj.bias", 1, c.KVDim(), false)
			L.Bv = get(p+"self_attn.v_proj.bias", 1, c.KVDim(), false)
		}
		if c.OBias {
			L.Bo = get(p+"self_attn.o_proj.bias", 1, c.Dim, false)
		}
		if c.QKNorm {
			L.QNorm = get(p+"self_attn.q_norm.weight", 1, c.HeadDim, false)
			L.KNorm = get(p+"self_attn.k_norm.weight", 1, c.HeadDim, false)
		}
		L.FFNNorm = get(p+"post_attention_layernorm.weight", 1, c.Dim, false)
		if c.MoE != nil && err == nil {
			if lerr := m.loadMoELayer(src, i, get); lerr != nil && err == nil {
				err = lerr
			}
		}
		if c.MoE != nil && c.MoE.SparseLayer[i] {
			continue
		}
		L.Gate = get(p+"mlp.gate_proj.weight", c.Hidden, c.Dim, false)
		L.Up = get(p+"mlp.up_proj.weight", c.Hidden, c.Dim, false)
		L.Down = get(p+"mlp.down_proj.weight", c.Dim, c.Hidden, false)
	}
	if err != nil {
		return nil, err
	}
	// Let the backend re-lay the matmul weights once (CPU: column panels);
	// a tied classifier is also the embedding table, whose rows Embed reads.
	mats := []kernels.Tensor{m.LMHead}
	for i := range m.Layers {
		L := &m.Layers[i]
		mats = append(mats, L.Wq, L.Wk, L.Wv, L.Wo, L.Gate, L.Up, L.Down, L.Router)
	}
	for _, w := range mats {
		if err := kernels.PrepareMatMul(be, w, w == m.Embed); err != nil {
			return nil, fmt.Errorf("model: %s: prepare weights: %w", src.path(), err)
		}
		if w != nil && !referencesData(w) {
			// the backend holds a copy (a repacked Q4_K, a weight in its
			// huge-page arena): resident from now on, out of
			// MemAvailable, unlike the memory-mapped weights
			m.copiedBytes += int64(len(fileBytes[w]))
			releasePages(fileBytes[w])
		}
	}
	for _, b := range m.repacked {
		releasePages(b)
	}
	m.repacked = nil
	table := kernels.RoPETable(c.MaxPos, c.InvFreq())
	if c.RopeScaling == nil && len(c.RopeFreqFactors) == 0 && (c.MoE == nil || c.MoE.YaRN == nil) {
		// unscaled RoPE: llama.cpp's angles, for bit-exact rotations
		table = kernels.RoPETableGGML(c.MaxPos, c.HeadDim, c.RopeTheta)
	}
	if f := float32(c.RopeAttnFactor()); f != 1 {
		for i := range table {
			table[i] *= f
		}
	}
	if m.rope, err = be.WeightF32(c.MaxPos, c.HeadDim, table); err != nil {
		return nil, fmt.Errorf("model: rope table: %w", err)
	}
	return m, nil
}

// WeightsF32 reports whether the model at path (as Load takes it) stores
// its matrices as float32, judged by the first layer's query projection:
// the engine's "auto" KV-cache type is float32 for such models and float16
// for every narrower format (F16, BF16, quantized), as vLLM's auto follows
// the model's dtype and llama.cpp defaults to an F16 cache.
func WeightsF32(path string) (bool, error) {
	format, err := DetectFormat(path)
	if err != nil {
		return false, err
	}
	var src source
	switch format {
	case FormatHF:
		st, err := safetensors.OpenModel(path)
		if err != nil {
			return false, fmt.Errorf("model: %w", err)
		}
		src = &hfSource{m: st}
	case FormatGGUF:
		f, err := gguf.Open(path)
		if err != nil {
			return false, fmt.Errorf("model: %w", err)
		}
		src = &ggufSource{f: f, arch: f.Arch()}
	default:
		return true, nil // llama2.c checkpoints are float32
	}
	defer src.close()
	t, ok, err := src.get("model.layers.0.self_attn.q_proj.weight")
	if err != nil || !ok {
		return false, fmt.Errorf("model: %s: no layer 0 query projection to judge the weights' type (%v)", path, err)
	}
	return t.enc == "F32", nil
}
