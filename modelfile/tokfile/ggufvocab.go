package tokfile

import (
	"fmt"
	"strings"

	"github.com/sluice-llm/sluice/modelfile/gguf"
)

// GGUF token types (tokenizer.ggml.token_type), as llama.cpp defines them.
const (
	TokenTypeNormal      = 1
	TokenTypeUnknown     = 2
	TokenTypeControl     = 3
	TokenTypeUserDefined = 4
	TokenTypeUnused      = 5
	TokenTypeByte        = 6
)

// GGUFVocab is the tokenizer stored in a GGUF file's metadata.
type GGUFVocab struct {
	// Model is tokenizer.ggml.model: "llama" (SentencePiece-style), "gpt2"
	// (byte-level BPE), ...
	Model string
	// Pre is tokenizer.ggml.pre, the pre-tokenizer name ("default",
	// "llama-bpe", "qwen2", "gpt-2", ...), "" if absent.
	Pre string
	// Tokens are the token texts by id.
	Tokens []string
	// Scores are per-token scores (SentencePiece); nil if absent.
	Scores []float32
	// TokenTypes are per-token types (TokenType*); nil if absent.
	TokenTypes []int32
	// Merges are the BPE merges in rank order ("a b" split in two).
	Merges [][2]string
	// BOS, EOS, UNK, PAD, EOT ids; -1 when absent.
	BOS, EOS, UNK, PAD, EOT int32
	// AddBOS, AddEOS, AddSpacePrefix are nil when the file does not say.
	AddBOS, AddEOS, AddSpacePrefix *bool
	// ChatTemplate is tokenizer.chat_template ("" if none).
	ChatTemplate string
}

// ReadGGUFVocab opens a GGUF file and reads its vocabulary.
func ReadGGUFVocab(path string) (*GGUFVocab, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	v, err := GGUFVocabFromMeta(&f.Meta)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// GGUFVocabFromMeta reads the vocabulary from parsed GGUF metadata.
func GGUFVocabFromMeta(m *gguf.Metadata) (*GGUFVocab, error) {
	v := &GGUFVocab{BOS: -1, EOS: -1, UNK: -1, PAD: -1, EOT: -1}
	var ok bool
	if v.Model, ok = m.String("tokenizer.ggml.model"); !ok {
		return nil, fmt.Errorf("field tokenizer.ggml.model: missing or not a string")
	}
	v.Pre, _ = m.String("tokenizer.ggml.pre")
	if v.Tokens, ok = m.Strings("tokenizer.ggml.tokens"); !ok || len(v.Tokens) == 0 {
		return nil, fmt.Errorf("field tokenizer.ggml.tokens: missing or not a string array")
	}
	n := len(v.Tokens)
	if _, present := m.Value("tokenizer.ggml.scores"); present {
		if v.Scores, ok = m.Float32s("tokenizer.ggml.scores"); !ok || len(v.Scores) != n {
			return nil, fmt.Errorf("field tokenizer.ggml.scores: want %d float32 values", n)
		}
	}
	if _, present := m.Value("tokenizer.ggml.token_type"); present {
		if v.TokenTypes, ok = m.Int32s("tokenizer.ggml.token_type"); !ok || len(v.TokenTypes) != n {
			return nil, fmt.Errorf("field tokenizer.ggml.token_type: want %d int32 values", n)
		}
	}
	if _, present := m.Value("tokenizer.ggml.merges"); present {
		merges, ok := m.Strings("tokenizer.ggml.merges")
		if !ok {
			return nil, fmt.Errorf("field tokenizer.ggml.merges: not a string array")
		}
		v.Merges = make([][2]string, len(merges))
		for i, s := range merges {
			a, b, ok := strings.Cut(s, " ")
			if !ok || a == "" || b == "" {
				return nil, fmt.Errorf("field tokenizer.ggml.merges[%d]: %q is not two space-separated tokens", i, s)
			}
			v.Merges[i] = [2]string{a, b}
		}
	}
	for _, f := range []struct {
		key string
		dst *int32
	}{
		{"tokenizer.ggml.bos_token_id", &v.BOS},
		{"tokenizer.ggml.eos_token_id", &v.EOS},
		{"tokenizer.ggml.unknown_token_id", &v.UNK},
		{"tokenizer.ggml.padding_token_id", &v.PAD},
		{"tokenizer.ggml.eot_token_id", &v.EOT},
	} {
		id, ok := m.Uint(f.key)
		if !ok {
			continue
		}
		if id >= uint64(n) {
			continue // llama.cpp writes 0xFFFFFFFF for "none"
		}
		*f.dst = int32(id)
	}
	for _, f := range []struct {
		key string
		dst **bool
	}{
		{"tokenizer.ggml.add_bos_token", &v.AddBOS},
		{"tokenizer.ggml.add_eos_token", &v.AddEOS},
		{"tokenizer.ggml.add_space_prefix", &v.AddSpacePrefix},
	} {
		if b, ok := m.Bool(f.key); ok {
			*f.dst = &b
		}
	}
	v.ChatTemplate, _ = m.String("tokenizer.chat_template")
	return v, nil
}
