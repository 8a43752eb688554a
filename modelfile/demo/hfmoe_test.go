package demo

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/modelfile/gguf"
	"github.com/sluice-llm/sluice/modelfile/safetensors"
	"github.com/sluice-llm/sluice/quant"
)

var update = flag.Bool("update", false, "rewrite testdata goldens")

// mediumGptOss is a gpt-oss geometry big enough for several shards of
// 1 MiB and more than one block per expert row, small enough to write in
// a test.
var mediumGptOss = RealShape{Name: "gpt-oss-medium", Arch: "gpt-oss", Dim: 256, Hidden: 128, Layers: 3, Heads: 8, KVHeads: 2,
	HeadDim: 32, Vocab: 2048, MaxPos: 4096, RopeTheta: 150000, NormEps: 1e-5, QKVBias: true, Experts: 8, TopK: 2,
	ExpertHidden: 128, SlidingWindow: 16, YaRNFactor: 32, YaRNOrigPos: 256, TokenizerVocab: 1024}

// TestGenerateHFRoundTrip writes mediumGptOss with the streaming
// safetensors writer in 1 MiB shards and as gguf-mxfp4, and checks every
// tensor of the checkpoint against the GGUF file's: MXFP4 experts repacked
// from the split layout (gate and up rows de-interleaved) equal the GGUF
// blocks byte for byte, BF16 matrices are the same bytes, F32 vectors are
// their BF16 rounding. It also checks the shard names, the index (every
// tensor, total_size) and the shard size limit.
func TestGenerateHFRoundTrip(t *testing.T) {
	dir := t.TempDir()
	const shardBytes = 1 << 20
	if err := GenerateHFShape(dir, mediumGptOss, 3, shardBytes); err != nil {
		t.Fatal(err)
	}
	ggufPath := filepath.Join(t.TempDir(), "m.gguf")
	if err := GenerateShape(ggufPath, mediumGptOss, 3, FormatGGUFMXFP4); err != nil {
		t.Fatal(err)
	}
	gf, err := gguf.Open(ggufPath)
	if err != nil {
		t.Fatal(err)
	}
	defer gf.Close()

	var index struct {
		Metadata struct {
			TotalSize int64 `json:"total_size"`
		} `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &index); err != nil {
		t.Fatal(err)
	}
	shards := map[string]bool{}
	for _, s := range index.WeightMap {
		shards[s] = true
	}
	n := len(shards)
	if n < 3 {
		t.Fatalf("%d shards, want at least 3 at %d bytes each", n, shardBytes)
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i, n-1)
		if !shards[name] {
			t.Errorf("shard %s missing from the index (have %v)", name, shards)
		}
	}

	st, err := safetensors.OpenModel(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	names := st.Names()
	if len(names) != len(index.WeightMap) {
		t.Errorf("%d tensors in the shards, %d in the index", len(names), len(index.WeightMap))
	}
	var total int64
	perShard := map[string]int64{}
	for _, name := range names {
		data, ti, path, err := st.TensorData(name)
		if err != nil {
			t.Fatal(err)
		}
		total += int64(len(data))
		perShard[filepath.Base(path)] += int64(len(data))
		if index.WeightMap[name] != filepath.Base(path) {
			t.Errorf("%s: in %s, index says %s", name, filepath.Base(path), index.WeightMap[name])
		}
		checkAgainstGGUF(t, gf, name, ti, data)
	}
	if total != index.Metadata.TotalSize {
		t.Errorf("total_size %d, tensors hold %d bytes", index.Metadata.TotalSize, total)
	}
	for s, sz := range perShard {
		if sz > shardBytes {
			t.Errorf("%s holds %d bytes, over the %d limit", s, sz, shardBytes)
		}
	}
	// one layer's expected names, as openai/gpt-oss-20b names them
	for _, suffix := range []string{"input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.sinks",
		"self_attn.q_proj.bias", "self_attn.o_proj.bias", "mlp.router.weight", "mlp.router.bias",
		"mlp.experts.gate_up_proj_blocks", "mlp.experts.gate_up_proj_scales", "mlp.experts.gate_up_proj_bias",
		"mlp.experts.down_proj_blocks", "mlp.experts.down_proj_scales", "mlp.experts.down_proj_bias"} {
		if _, ok := index.WeightMap["model.layers.2."+suffix]; !ok {
			t.Errorf("model.layers.2.%s missing", suffix)
		}
	}
}

// ggufName maps a checkpoint tensor to the GGUF tensor(s) it mirrors.
func ggufName(name string) []string {
	switch name {
	case "model.embed_tokens.weight":
		return []string{"token_embd.weight"}
	case "model.norm.weight":
		return []string{"output_norm.weight"}
	case "lm_head.weight":
		return []string{"output.weight"}
	}
	var l int
	var rest string
	if _, err := fmt.Sscanf(name, "model.layers.%d.%s", &l, &rest); err != nil {
		return nil
	}
	g := fmt.Sprintf("blk.%d.", l)
	m := map[string][]string{
		"input_layernorm.weight": {"attn_norm.weight"}, "post_attention_layernorm.weight": {"post_attention_norm.weight"},
		"self_attn.q_proj.weight": {"attn_q.weight"}, "self_attn.k_proj.weight": {"attn_k.weight"}, "self_attn.v_proj.weight": {"attn_v.weight"},
		"self_attn.q_proj.bias": {"attn_q.bias"}, "self_attn.k_proj.bias": {"attn_k.bias"}, "self_attn.v_proj.bias": {"attn_v.bias"},
		"self_attn.o_proj.weight": {"attn_output.weight"}, "self_attn.o_proj.bias": {"attn_output.bias"},
		"self_attn.sinks": {"attn_sinks.weight"}, "mlp.router.weight": {"ffn_gate_inp.weight"}, "mlp.router.bias": {"ffn_gate_inp.bias"},
		"mlp.experts.gate_up_proj_blocks": {"ffn_gate_exps.weight", "ffn_up_exps.weight"},
		"mlp.experts.gate_up_proj_scales": {"ffn_gate_exps.weight", "ffn_up_exps.weight"},
		"mlp.experts.gate_up_proj_bias":   {"ffn_gate_exps.bias", "ffn_up_exps.bias"},
		"mlp.experts.down_proj_blocks":    {"ffn_down_exps.weight"}, "mlp.experts.down_proj_scales": {"ffn_down_exps.weight"},
		"mlp.experts.down_proj_bias": {"ffn_down_exps.bias"},
	}[rest]
	out := make([]string, len(m))
	for i, s := range m {
		out[i] = g + s
	}
	return out
}

// interleaveRows returns parts' rows alternating (row i of part p at
// len(parts)·i + p), each part being rows of rowBytes.
func interleaveRows(parts [][]byte, rowBytes int) []byte {
	var out []byte
	for i := 0; i < len(parts[0])/rowBytes; i++ {
		for _, p := range parts {
			out = append(out, p[i*rowBytes:(i+1)*rowBytes]...)
		}
	}
	return out
}

func checkAgainstGGUF(t *testing.T, gf *gguf.File, name string, ti safetensors.TensorInfo, data []byte) {
	t.Helper()
	gnames := ggufName(name)
	if len(gnames) == 0 {
		t.Errorf("%s: not a tensor of the GGUF layout", name)
		return
	}
	var parts [][]byte
	var gts []gguf.TensorInfo
	for _, gn := range gnames {
		d, gt, err := gf.TensorData(gn)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		parts, gts = append(parts, d), append(gts, gt)
	}
	// the checkpoint's shape holds the GGUF tensors' elements
	var gElems uint64
	for _, gt := range gts {
		e := uint64(1)
		for _, d := range gt.Dims {
			e *= d
		}
		gElems += e
	}
	switch {
	case strings.HasSuffix(name, "_blocks"), strings.HasSuffix(name, "_scales"):
		// repack into ggml blocks, then compare with the GGUF rows
		// interleaved the same way
		sh := ti.Shape // [experts, rows, blocks, (16)]
		nb := sh[0] * sh[1] * sh[2]
		if uint64(nb*quant.MXFP4Block) != gElems {
			t.Errorf("%s %v: %d values, GGUF has %d", name, sh, nb*quant.MXFP4Block, gElems)
			return
		}
		rowBytes := sh[2] * quant.MXFP4BlockBytes
		want := interleaveRows(parts, rowBytes)
		var blocks, scales []byte
		if strings.HasSuffix(name, "_blocks") {
			blocks = data
			scales = make([]byte, nb)
			for b := range scales {
				scales[b] = want[b*quant.MXFP4BlockBytes] // compare the blocks alone
			}
		} else {
			scales = data
			blocks = make([]byte, 16*nb)
			for b := 0; b < nb; b++ { // the blocks' bytes from want, in split order
				appendSplitBlock(blocks[16*b:16*b], want[b*quant.MXFP4BlockBytes+1:(b+1)*quant.MXFP4BlockBytes])
			}
		}
		got := make([]byte, len(want))
		if err := quant.MXFP4FromSplit(got, blocks, scales); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: repacked MXFP4 differs from the GGUF tensor(s) %v", name, gnames)
		}
	default:
		if ti.DType != "BF16" || uint64(len(data)/2) != gElems {
			t.Errorf("%s: %s %v, GGUF %v has %d values", name, ti.DType, ti.Shape, gnames, gElems)
			return
		}
		// F32 vectors become their BF16 rounding; BF16 stays as it is
		conv := make([][]byte, len(parts))
		for i, p := range parts {
			switch gts[i].Type {
			case gguf.TypeBF16:
				conv[i] = p
			case gguf.TypeF32:
				for j := 0; j < len(p); j += 4 {
					conv[i] = binary.LittleEndian.AppendUint16(conv[i], bf16RNE(math.Float32frombits(binary.LittleEndian.Uint32(p[j:]))))
				}
			default:
				t.Fatalf("%s: GGUF type %v", name, gts[i].Type)
			}
		}
		rowBytes := len(conv[0])
		if len(conv) == 2 { // gate_up bias: gate and up columns alternate
			rowBytes = 2
		}
		want := interleaveRows(conv, rowBytes)
		if !bytes.Equal(data, want) {
			t.Errorf("%s differs from the GGUF tensor(s) %v", name, gnames)
		}
	}
}

// TestGptOssConfigGolden checks gpt-oss-20b's config.json (the published
// fields and values) against its golden.
func TestGptOssConfigGolden(t *testing.T) {
	for _, c := range []struct{ file, golden string }{
		{"config.json", "gpt-oss-20b.config.json"},
	} {
		got, err := json.MarshalIndent(gptOssConfig(RealShapes["gpt-oss-20b"]), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		path := filepath.Join("testdata", c.golden)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s (go test -update rewrites it):\n%s", c.file, path, got)
		}
	}
}

// TestGenerateHFErrors checks that shapes the hf writer does not take are
// refused with an error naming them.
func TestGenerateHFErrors(t *testing.T) {
	for _, c := range []struct {
		shape string
		want  string
	}{
		{"qwen3-30b-a3b", "qwen3-30b-a3b (qwen3moe) is written as GGUF only"},
		{"llama3.2-1b", "llama3.2-1b (llama) is written as GGUF only"},
		{"nope", `unknown shape "nope"`},
	} {
		err := GenerateHF(t.TempDir(), c.shape, 0)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.shape, err, c.want)
		}
	}
	names := ShapeNames()
	sort.Strings(names)
	for _, n := range names {
		if s, ok := RealShapes[n]; ok && s.Arch == "gpt-oss" && s.Dim%32 != 0 {
			t.Errorf("gpt-oss shape %s: dim %d is not a multiple of 32", n, s.Dim)
		}
	}
}
