package tokfile

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
)

// Llama2CVocab is a llama2.c tokenizer.bin: a SentencePiece vocabulary as
// exported by llama2.c's tokenizer.py (token text with "▁" already turned
// into a space, byte tokens written as "<0xNN>").
type Llama2CVocab struct {
	// MaxTokenLen is the header's longest-token length.
	MaxTokenLen int
	// Tokens are the token texts by id.
	Tokens []string
	// Scores are the per-token merge scores.
	Scores []float32
}

// ReadLlama2C reads a llama2.c tokenizer.bin. The vocabulary size is not in
// the file: the reader takes every token until the end of the file.
func ReadLlama2C(path string) (*Llama2CVocab, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read llama2.c tokenizer: %w", err)
	}
	v, err := ParseLlama2C(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// ParseLlama2C parses llama2.c tokenizer.bin content: int32 max_token_len,
// then per token float32 score, int32 length and the bytes.
func ParseLlama2C(data []byte) (*Llama2CVocab, error) {
	if len(data) < 4 {
		return nil, fmt.Errorf("field max_token_len: file is %d bytes", len(data))
	}
	le := binary.LittleEndian
	maxLen := int32(le.Uint32(data))
	if maxLen <= 0 || maxLen > 1<<16 {
		return nil, fmt.Errorf("field max_token_len: %d out of range", maxLen)
	}
	v := &Llama2CVocab{MaxTokenLen: int(maxLen)}
	off := 4
	for off < len(data) {
		i := len(v.Tokens)
		if len(data)-off < 8 {
			return nil, fmt.Errorf("token %d at offset %d: truncated header (%d bytes left)", i, off, len(data)-off)
		}
		score := math.Float32frombits(le.Uint32(data[off:]))
		n := int32(le.Uint32(data[off+4:]))
		off += 8
		if n < 0 || int(n) > len(data)-off {
			return nil, fmt.Errorf("token %d at offset %d: length %d exceeds the %d bytes left", i, off-4, n, len(data)-off)
		}
		if n > maxLen {
			return nil, fmt.Errorf("token %d: length %d exceeds max_token_len %d", i, n, maxLen)
		}
		v.Tokens = append(v.Tokens, string(data[off:off+int(n)]))
		v.Scores = append(v.Scores, score)
		off += int(n)
	}
	if len(v.Tokens) == 0 {
		return nil, fmt.Errorf("field tokens: none")
	}
	return v, nil
}
