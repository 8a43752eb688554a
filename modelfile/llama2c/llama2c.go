// Package llama2c reads Andrej Karpathy's llama2.c checkpoints (.bin):
// the legacy v0 layout (a 7-int32 header, then float32 weights in run.c's
// order, the classifier shared with the embedding when vocab_size is
// positive and stored separately when it is negative) and the v1 layout
// (magic "ak42", version 1, a 256-byte header, norms first).
//
// Tensors are exposed under Hugging Face Llama names
// ("model.layers.0.self_attn.q_proj.weight", ...) with PyTorch's [out × in]
// layout, served from a read-only memory map. The query and key rows are
// NOT permuted: llama2.c rotates interleaved pairs (Meta's convention),
// so a runtime must apply RoPE to pairs (2j, 2j+1) for these weights.
package llama2c

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-llm/sluice/modelfile/mapfile"
)

// Config is a checkpoint's header.
type Config struct {
	Dim, HiddenDim, Layers, Heads, KVHeads, VocabSize, SeqLen int
	// SharedClassifier is true when the output projection is the token
	// embedding.
	SharedClassifier bool
	// Version is 0 (legacy) or 1.
	Version int
}

// HeadDim returns Dim / Heads.
func (c Config) HeadDim() int { return c.Dim / c.Heads }

// KVDim returns the width of the key and value projections.
func (c Config) KVDim() int { return c.HeadDim() * c.KVHeads }

const (
	v0HeaderBytes = 7 * 4
	v1HeaderBytes = 256
	magicAK42     = 0x616b3432
)

// ParseHeader decodes the header at the start of b and returns the config
// and the header size in bytes.
func ParseHeader(b []byte) (Config, int, error) {
	if len(b) < v0HeaderBytes {
		return Config{}, 0, fmt.Errorf("llama2c: %d bytes, too short for a header", len(b))
	}
	u := func(i int) int32 { return int32(binary.LittleEndian.Uint32(b[4*i:])) }
	var c Config
	off, hdr := 0, v0HeaderBytes
	if uint32(u(0)) == magicAK42 {
		if len(b) < v1HeaderBytes {
			return Config{}, 0, fmt.Errorf("llama2c: %d bytes, too short for a v1 header", len(b))
		}
		if v := u(1); v != 1 {
			return Config{}, 0, fmt.Errorf("llama2c: version %d not supported (only the float32 versions 0 and 1)", v)
		}
		c.Version, off, hdr = 1, 2, v1HeaderBytes
	}
	c.Dim, c.HiddenDim, c.Layers, c.Heads, c.KVHeads = int(u(off)), int(u(off+1)), int(u(off+2)), int(u(off+3)), int(u(off+4))
	vocab := int(u(off + 5))
	c.SeqLen = int(u(off + 6))
	if c.Version == 1 {
		c.VocabSize = vocab
		c.SharedClassifier = b[4*(off+7)] != 0
	} else {
		c.SharedClassifier = vocab > 0
		c.VocabSize = vocab
		if vocab < 0 {
			c.VocabSize = -vocab
		}
	}
	const lim = 1 << 20
	if c.Dim <= 0 || c.HiddenDim <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.VocabSize <= 0 || c.SeqLen <= 0 ||
		c.Dim > lim || c.HiddenDim > lim || c.Layers > 4096 || c.VocabSize > lim || c.SeqLen > lim {
		return Config{}, 0, fmt.Errorf("llama2c: implausible header %+v", c)
	}
	if c.Dim%c.Heads != 0 || c.Heads%c.KVHeads != 0 || c.HeadDim()%2 != 0 {
		return Config{}, 0, fmt.Errorf("llama2c: inconsistent header: dim %d, heads %d, kv heads %d", c.Dim, c.Heads, c.KVHeads)
	}
	return c, hdr, nil
}

// Tensor is one weight matrix of a checkpoint.
type Tensor struct {
	Name       string
	Rows, Cols int
	// Data holds Rows*Cols little-endian float32 values.
	Data []byte
}

// File is an open checkpoint.
type File struct {
	Path   string
	Config Config
	data   []byte
	byName map[string]Tensor
	names  []string
}

// Open memory-maps a checkpoint and lays out its tensors.
func Open(path string) (*File, error) {
	data, err := mapfile.Map(path, v0HeaderBytes)
	if err != nil {
		return nil, fmt.Errorf("llama2c: %w", err)
	}
	f, err := parse(path, data)
	if err != nil {
		_ = mapfile.Unmap(data)
		return nil, err
	}
	return f, nil
}

// Parse lays out a checkpoint held in memory.
func Parse(data []byte) (*File, error) { return parse("<memory>", data) }

func parse(path string, data []byte) (*File, error) {
	c, hdr, err := ParseHeader(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f := &File{Path: path, Config: c, data: data, byName: map[string]Tensor{}}
	off := int64(hdr)
	add := func(name string, rows, cols int) error {
		n := int64(rows) * int64(cols) * 4
		if off+n > int64(len(data)) {
			return fmt.Errorf("llama2c: %s: tensor %s [%d × %d] needs bytes [%d, %d) but the file has %d: truncated file or wrong header",
				path, name, rows, cols, off, off+n, len(data))
		}
		f.byName[name] = Tensor{Name: name, Rows: rows, Cols: cols, Data: data[off : off+n : off+n]}
		f.names = append(f.names, name)
		off += n
		return nil
	}
	L, dim, hid, kv, vocab := c.Layers, c.Dim, c.HiddenDim, c.KVDim(), c.VocabSize
	layer := func(i int, s string) string { return fmt.Sprintf("model.layers.%d.%s", i, s) }
	perLayer := func(s string, rows, cols int) error {
		for i := 0; i < L; i++ {
			if err := add(layer(i, s), rows, cols); err != nil {
				return err
			}
		}
		return nil
	}
	type step func() error
	var steps []step
	emb := func() error { return add("model.embed_tokens.weight", vocab, dim) }
	attnNorm := func() error { return perLayer("input_layernorm.weight", 1, dim) }
	ffnNorm := func() error { return perLayer("post_attention_layernorm.weight", 1, dim) }
	finalNorm := func() error { return add("model.norm.weight", 1, dim) }
	mats := []step{
		func() error { return perLayer("self_attn.q_proj.weight", dim, dim) },
		func() error { return perLayer("self_attn.k_proj.weight", kv, dim) },
		func() error { return perLayer("self_attn.v_proj.weight", kv, dim) },
		func() error { return perLayer("self_attn.o_proj.weight", dim, dim) },
	}
	ffn := []step{
		func() error { return perLayer("mlp.gate_proj.weight", hid, dim) },
		func() error { return perLayer("mlp.down_proj.weight", dim, hid) },
		func() error { return perLayer("mlp.up_proj.weight", hid, dim) },
	}
	if c.Version == 0 {
		steps = append(steps, emb, attnNorm)
		steps = append(steps, mats...)
		steps = append(steps, ffnNorm)
		steps = append(steps, ffn...)
		steps = append(steps, finalNorm, func() error {
			off += int64(c.SeqLen) * int64(c.HeadDim()) * 4 // freq_cis_real + freq_cis_imag
			return nil
		})
	} else {
		steps = append(steps, attnNorm, ffnNorm, finalNorm, emb)
		steps = append(steps, mats...)
		steps = append(steps, ffn...)
	}
	if !c.SharedClassifier {
		steps = append(steps, func() error { return add("lm_head.weight", vocab, dim) })
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Names returns the tensor names in file order.
func (f *File) Names() []string { return f.names }

// Tensor returns the named tensor.
func (f *File) Tensor(name string) (Tensor, error) {
	t, ok := f.byName[name]
	if !ok {
		return Tensor{}, fmt.Errorf("llama2c: %s: no tensor %q", f.Path, name)
	}
	return t, nil
}

// Close unmaps the file.
func (f *File) Close() error {
	if f.data == nil || f.Path == "<memory>" {
		return nil
	}
	err := mapfile.Unmap(f.data)
	f.data = nil
	if err != nil {
		return fmt.Errorf("llama2c: %s: %w", f.Path, err)
	}
	return nil
}
