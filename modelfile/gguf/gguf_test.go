package gguf

import (
	"github.com/sluice-llm/sluice/quant"

	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/internal/testenv"
)

func TestOpenRealFiles(t *testing.T) {
	tests := []struct {
		rel       string
		arch      string
		nTensors  int
		vocab     int
		tokModel  string
		checkData string // a tensor whose data must be readable
	}{
		{"aidreams260K/aidreams260K-f32.gguf", "llama", 0, 512, "llama", "token_embd.weight"},
		{"llama-2-tiny-random/llama-2-tiny-random.gguf", "llama", 0, 32000, "llama", "token_embd.weight"},
		{"tokenizers/llama-cpp-vocab/ggml-vocab-llama-spm.gguf", "llama", -1, 32000, "llama", ""},
		{"tokenizers/llama-cpp-vocab/ggml-vocab-gpt-2.gguf", "gpt2", -1, 50257, "gpt2", ""},
		{"tokenizers/llama-cpp-vocab/ggml-vocab-phi-3.gguf", "phi3", -1, 32064, "llama", ""},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.rel), func(t *testing.T) {
			f, err := Open(testenv.SharedFile(t, tc.rel))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if got := f.Arch(); got != tc.arch {
				t.Errorf("arch = %q, want %q", got, tc.arch)
			}
			toks, ok := f.Meta.Strings("tokenizer.ggml.tokens")
			if !ok || len(toks) != tc.vocab {
				t.Errorf("tokens: %d (ok=%v), want %d", len(toks), ok, tc.vocab)
			}
			if m, _ := f.Meta.String("tokenizer.ggml.model"); m != tc.tokModel {
				t.Errorf("tokenizer.ggml.model = %q, want %q", m, tc.tokModel)
			}
			if tc.nTensors < 0 && len(f.Tensors()) != 0 {
				t.Errorf("vocab-only file has %d tensors", len(f.Tensors()))
			}
			if err := f.Check(); err != nil {
				t.Error(err)
			}
			if tc.checkData != "" {
				b, ti, err := f.TensorData(tc.checkData)
				if err != nil {
					t.Fatal(err)
				}
				if uint64(len(b)) != ti.Size || ti.Dims[1] != uint64(tc.vocab) {
					t.Errorf("%s: %d bytes, info %+v", tc.checkData, len(b), ti)
				}
			}
		})
	}
}

func TestAidreamsShapes(t *testing.T) {
	f, err := Open(testenv.SharedFile(t, "aidreams260K/aidreams260K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, ok := f.Meta.Uint("llama.embedding_length"); !ok || n != 64 {
		t.Errorf("llama.embedding_length = %d, %v; want 64", n, ok)
	}
	if n, ok := f.Meta.Uint("llama.block_count"); !ok || n != 4 {
		t.Errorf("llama.block_count = %d, %v; want 4", n, ok)
	}
	scores, ok := f.Meta.Float32s("tokenizer.ggml.scores")
	if !ok || len(scores) != 512 {
		t.Errorf("scores: %d, %v", len(scores), ok)
	}
	types, ok := f.Meta.Int32s("tokenizer.ggml.token_type")
	if !ok || len(types) != 512 {
		t.Errorf("token_type: %d, %v", len(types), ok)
	}
	ti, ok := f.Tensor("blk.0.attn_q.weight")
	if !ok || ti.Type != TypeF32 || ti.Dims[0] != 64 || ti.Dims[1] != 64 || ti.Size != 64*64*4 {
		t.Errorf("blk.0.attn_q.weight = %+v, %v", ti, ok)
	}
	// The last tensor must end inside the file.
	var end uint64
	for _, ti := range f.Tensors() {
		end = max(end, f.DataOffset+ti.Offset+ti.Size)
	}
	st, _ := os.Stat(f.Path)
	if end > uint64(st.Size()) {
		t.Errorf("tensors end at %d beyond file size %d", end, st.Size())
	}
}

func writeTestModel(t *testing.T) ([]byte, []float32) {
	t.Helper()
	w := make([]float32, 64)
	for i := range w {
		w[i] = float32(i)/8 - 3.5
	}
	q, err := quant.QuantizeQ8_0(w), error(nil)
	if err != nil {
		t.Fatal(err)
	}
	meta := []KV{
		{"general.architecture", "llama"},
		{"llama.block_count", uint32(1)},
		{"llama.rope.freq_base", float32(10000)},
		{"general.flag", true},
		{"tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "a"}},
		{"tokenizer.ggml.scores", []float32{0, 0, 0, -1.5}},
		{"tokenizer.ggml.token_type", []int32{2, 3, 3, 1}},
		{"some.int", -7},
		{"some.u64s", []uint64{1, 1 << 40}},
	}
	tensors := []Tensor{
		{Name: "a.f32", Dims: []uint64{8, 8}, Type: TypeF32, Data: EncodeF32(w)},
		{Name: "b.f16", Dims: []uint64{64}, Type: TypeF16, Data: EncodeF16(w)},
		{Name: "c.q8", Dims: []uint64{32, 2}, Type: TypeQ8_0, Data: q},
	}
	var buf bytes.Buffer
	if err := Write(&buf, meta, tensors); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), w
}

func TestWriteRoundTrip(t *testing.T) {
	data, w := writeTestModel(t)
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version != 3 || f.Arch() != "llama" {
		t.Errorf("version %d arch %q", f.Version, f.Arch())
	}
	if got := f.Meta.Keys(); len(got) != 9 || got[0] != "general.architecture" || got[8] != "some.u64s" {
		t.Errorf("keys = %v", got)
	}
	if v, _ := f.Meta.Float("llama.rope.freq_base"); v != 10000 {
		t.Errorf("freq_base = %v", v)
	}
	if v, ok := f.Meta.Bool("general.flag"); !v || !ok {
		t.Errorf("general.flag = %v %v", v, ok)
	}
	if v, ok := f.Meta.Int("some.int"); v != -7 || !ok {
		t.Errorf("some.int = %v %v", v, ok)
	}
	if _, ok := f.Meta.Uint("some.int"); ok {
		t.Errorf("negative int read as uint")
	}
	if v, ok := f.Meta.Value("some.u64s"); !ok || v.Any().([]uint64)[1] != 1<<40 {
		t.Errorf("some.u64s = %v", v.Any())
	}
	b, ti, err := f.TensorData("a.f32")
	if err != nil || !bytes.Equal(b, EncodeF32(w)) || ti.NumElements() != 64 {
		t.Errorf("a.f32: %v %v", ti, err)
	}
	b, _, err = f.TensorData("b.f16")
	if err != nil {
		t.Fatal(err)
	}
	for i := range w {
		h := uint16(b[2*i]) | uint16(b[2*i+1])<<8
		if quant.F16ToF32(h) != w[i] { // all values are exact in F16
			t.Errorf("f16[%d] = %v, want %v", i, quant.F16ToF32(h), w[i])
		}
	}
	b, ti, err = f.TensorData("c.q8")
	if err != nil || len(b) != 68 || ti.Type != TypeQ8_0 {
		t.Fatalf("c.q8: %v %v", ti, err)
	}
	for blk := 0; blk < 2; blk++ {
		d := quant.F16ToF32(uint16(b[34*blk]) | uint16(b[34*blk+1])<<8)
		for j := 0; j < 32; j++ {
			got := d * float32(int8(b[34*blk+2+j]))
			if math.Abs(float64(got-w[32*blk+j])) > float64(d)/2+1e-6 {
				t.Errorf("q8[%d] = %v, want %v", 32*blk+j, got, w[32*blk+j])
			}
		}
	}
	if f.DataOffset%32 != 0 {
		t.Errorf("data offset %d not aligned", f.DataOffset)
	}
}

func TestTruncatedTensorError(t *testing.T) {
	data, _ := writeTestModel(t)
	f, err := Parse(data[:len(data)-40])
	if err != nil {
		t.Fatal(err) // the directory is intact; only tensor data is cut
	}
	_, _, err = f.TensorData("c.q8")
	if err == nil || !strings.Contains(err.Error(), "c.q8") || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("TensorData on truncated file: %v", err)
	}
	if err := f.Check(); err == nil {
		t.Error("Check passed on truncated file")
	}
}

func TestParseErrors(t *testing.T) {
	data, _ := writeTestModel(t)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "magic"},
		{"bad magic", append([]byte("GGUX"), data[4:]...), "bad magic"},
		{"bad version", append(append([]byte("GGUF"), 9, 0, 0, 0), data[8:]...), "version"},
		{"cut header", data[:30], "cannot fit"},
		{"cut metadata", data[:200], "truncated"},
		{"huge kv count", append(append([]byte{}, data[:16]...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0), "metadata count"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want mention of %q", err, tc.want)
			}
		})
	}
}

func TestF16(t *testing.T) {
	tests := []struct {
		f float32
		h uint16
	}{
		{0, 0}, {1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65520, 0x7c00},
		{float32(math.Inf(1)), 0x7c00}, {5.960464477539063e-08, 0x0001}, {6.103515625e-05, 0x0400},
		{1.0009765625, 0x3c01}, {1.00048828125, 0x3c00}, // tie to even
	}
	for _, tc := range tests {
		if got := quant.F32ToF16(tc.f); got != tc.h {
			t.Errorf("quant.F32ToF16(%v) = %#04x, want %#04x", tc.f, got, tc.h)
		}
		if !math.IsInf(float64(tc.f), 0) && tc.h != 0x7c00 && tc.h != 0x3c00 {
			if back := quant.F16ToF32(tc.h); back != tc.f {
				t.Errorf("quant.F16ToF32(%#04x) = %v, want %v", tc.h, back, tc.f)
			}
		}
	}
}

func FuzzParse(f *testing.F) {
	var buf bytes.Buffer
	_ = Write(&buf, []KV{{"a", "b"}, {"n", []int32{1, 2}}, {"nest", Value{Type: ValueArray, Elem: ValueArray, v: []Value{{Type: ValueArray, Elem: ValueString, v: []string{"x"}}}}}},
		[]Tensor{{Name: "t", Dims: []uint64{2}, Type: TypeF32, Data: make([]byte, 8)}})
	f.Add(buf.Bytes())
	f.Add([]byte("GGUF\x03\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Parse(data)
		if err != nil {
			return
		}
		for _, k := range g.Meta.Keys() {
			g.Meta.String(k)
			g.Meta.Int32s(k)
			g.Meta.Float(k)
		}
		for _, ti := range g.Tensors() {
			b, _, err := g.TensorData(ti.Name)
			if err == nil && uint64(len(b)) != ti.Size {
				t.Fatalf("tensor %s: %d bytes, want %d", ti.Name, len(b), ti.Size)
			}
		}
	})
}
