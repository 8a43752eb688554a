package tokfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// TokenizerJSON is the content of a Hugging Face tokenizer.json.
type TokenizerJSON struct {
	// Model is the tokenization model (only BPE is supported by Sluice).
	Model Model
	// Normalizer is applied to text before pre-tokenization; nil if none.
	Normalizer *Normalizer
	// PreTokenizer splits normalized text into words; nil if none.
	PreTokenizer *PreTokenizer
	// Decoder turns tokens back into text; nil if none.
	Decoder *Decoder
	// PostProcessor adds special tokens around an encoding; nil if none.
	PostProcessor *PostProcessor
	// AddedTokens are the tokens matched in text before the model runs.
	AddedTokens []AddedToken
}

// Model is the "model" object of tokenizer.json.
type Model struct {
	// Type is "BPE" (others are reported but not tokenized by Sluice).
	Type string
	// Vocab maps token text to id.
	Vocab map[string]int
	// Merges are the BPE merges in rank order.
	Merges [][2]string
	// UnkToken is the unknown token's text, "" if none.
	UnkToken string
	// ByteFallback emits <0xNN> tokens for characters not in the vocab.
	ByteFallback bool
	// FuseUnk merges consecutive unknown tokens into one.
	FuseUnk bool
	// IgnoreMerges emits a word found whole in the vocab without merging.
	IgnoreMerges bool
	// ContinuingSubwordPrefix decorates non-initial subwords (unsupported
	// by Sluice unless empty).
	ContinuingSubwordPrefix string
	// EndOfWordSuffix decorates word-final subwords (unsupported unless
	// empty).
	EndOfWordSuffix string
}

// AddedToken is one entry of "added_tokens".
type AddedToken struct {
	// ID is the token's id.
	ID int `json:"id"`
	// Content is the token's literal text.
	Content string `json:"content"`
	// SingleWord matches the token only when not inside a word.
	SingleWord bool `json:"single_word"`
	// LStrip and RStrip absorb whitespace left/right of the token.
	LStrip bool `json:"lstrip"`
	RStrip bool `json:"rstrip"`
	// Normalized matches the token against normalized text.
	Normalized bool `json:"normalized"`
	// Special marks control tokens (skipped when decoding with
	// skip_special_tokens).
	Special bool `json:"special"`
}

// Pattern is a Split/Replace pattern: exactly one of String and Regex is set.
type Pattern struct {
	// String is a literal pattern.
	String string `json:"String"`
	// Regex is a regular expression (Oniguruma syntax in the file).
	Regex string `json:"Regex"`
}

// IsRegex reports whether the pattern is a regular expression.
func (p Pattern) IsRegex() bool { return p.Regex != "" }

// Normalizer is one normalizer node. Type is one of NFC, NFD, NFKC, NFKD,
// Lowercase, Prepend, Replace, Strip, Sequence (others are kept with their
// Type so that the tokenizer can refuse them by name).
type Normalizer struct {
	// Type names the normalizer.
	Type string `json:"type"`
	// Prepend is Prepend's text.
	Prepend string `json:"prepend"`
	// Pattern and Content are Replace's pattern and replacement.
	Pattern Pattern `json:"pattern"`
	Content string  `json:"content"`
	// StripLeft and StripRight are Strip's sides.
	StripLeft  bool `json:"strip_left"`
	StripRight bool `json:"strip_right"`
	// Normalizers are Sequence's children.
	Normalizers []*Normalizer `json:"normalizers"`
}

// PreTokenizer is one pre-tokenizer node. Type is one of ByteLevel, Split,
// Sequence, Metaspace, Digits, Whitespace, WhitespaceSplit, Punctuation.
type PreTokenizer struct {
	// Type names the pre-tokenizer.
	Type string `json:"type"`
	// AddPrefixSpace (ByteLevel, legacy Metaspace) prepends a space.
	AddPrefixSpace bool `json:"add_prefix_space"`
	// UseRegex (ByteLevel) splits with the GPT-2 regex.
	UseRegex bool `json:"use_regex"`
	// Pattern, Behavior and Invert configure Split.
	Pattern  Pattern `json:"pattern"`
	Behavior string  `json:"behavior"`
	Invert   bool    `json:"invert"`
	// Replacement, PrependScheme and Split configure Metaspace.
	Replacement   string `json:"replacement"`
	PrependScheme string `json:"prepend_scheme"`
	Split         bool   `json:"split"`
	// IndividualDigits configures Digits.
	IndividualDigits bool `json:"individual_digits"`
	// PreTokenizers are Sequence's children.
	PreTokenizers []*PreTokenizer `json:"pretokenizers"`
}

// Decoder is one decoder node (ByteLevel, Metaspace, Replace, ByteFallback,
// Fuse, Strip, Sequence, WordPiece...).
type Decoder struct {
	// Type names the decoder.
	Type string `json:"type"`
	// Pattern and Content configure Replace; Content is also Strip's
	// character.
	Pattern Pattern `json:"pattern"`
	Content string  `json:"content"`
	// Start and Stop are how many characters Strip removes at each end.
	Start int `json:"start"`
	Stop  int `json:"stop"`
	// Replacement, PrependScheme and AddPrefixSpace configure Metaspace.
	Replacement    string `json:"replacement"`
	PrependScheme  string `json:"prepend_scheme"`
	AddPrefixSpace *bool  `json:"add_prefix_space"`
	// Decoders are Sequence's children.
	Decoders []*Decoder `json:"decoders"`
}

// PostProcessor is the post_processor node. For TemplateProcessing, Single
// lists the pieces of a one-sequence encoding and SpecialTokens their ids.
type PostProcessor struct {
	// Type names the post-processor.
	Type string `json:"type"`
	// Single is TemplateProcessing's one-sequence template.
	Single []TemplatePiece `json:"single"`
	// SpecialTokens are TemplateProcessing's token ids by name.
	SpecialTokens map[string]TemplateSpec `json:"special_tokens"`
	// Sep and Cls are Bert/RobertaProcessing's [token, id] pairs.
	Sep []any `json:"sep"`
	Cls []any `json:"cls"`
	// Processors are Sequence's children.
	Processors []*PostProcessor `json:"processors"`
}

// TemplatePiece is one element of a TemplateProcessing template: either a
// special token (SpecialToken set) or the input sequence (Sequence set).
type TemplatePiece struct {
	// SpecialToken names a special_tokens entry.
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	// Sequence stands for the input ("A").
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

// TemplateSpec is the entry of special_tokens in TemplateProcessing.
type TemplateSpec struct {
	// ID is the entry's name.
	ID string `json:"id"`
	// IDs are the token ids it adds.
	IDs []int `json:"ids"`
}

// rawModel mirrors the JSON model with merges in either form.
type rawModel struct {
	Type                    *string           `json:"type"`
	Vocab                   json.RawMessage   `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
	UnkToken                *string           `json:"unk_token"`
	ByteFallback            bool              `json:"byte_fallback"`
	FuseUnk                 bool              `json:"fuse_unk"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
}

type rawTokenizer struct {
	Model         *rawModel       `json:"model"`
	Normalizer    *Normalizer     `json:"normalizer"`
	PreTokenizer  *PreTokenizer   `json:"pre_tokenizer"`
	Decoder       *Decoder        `json:"decoder"`
	PostProcessor *PostProcessor  `json:"post_processor"`
	AddedTokens   []AddedToken    `json:"added_tokens"`
	Version       json.RawMessage `json:"version"`
}

// ReadTokenizerJSON reads and parses a tokenizer.json file.
func ReadTokenizerJSON(path string) (*TokenizerJSON, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tokenizer.json: %w", err)
	}
	t, err := ParseTokenizerJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseTokenizerJSON parses tokenizer.json content.
func ParseTokenizerJSON(data []byte) (*TokenizerJSON, error) {
	var raw rawTokenizer
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("parse tokenizer.json: %w", err)
	}
	if raw.Model == nil {
		return nil, fmt.Errorf("field model: missing")
	}
	m := raw.Model
	out := &TokenizerJSON{
		Normalizer:    raw.Normalizer,
		PreTokenizer:  raw.PreTokenizer,
		Decoder:       raw.Decoder,
		PostProcessor: raw.PostProcessor,
		AddedTokens:   raw.AddedTokens,
	}
	out.Model.Type = "BPE" // the default when "type" is absent (old files)
	if m.Type != nil {
		out.Model.Type = *m.Type
	}
	out.Model.ByteFallback = m.ByteFallback
	out.Model.FuseUnk = m.FuseUnk
	out.Model.IgnoreMerges = m.IgnoreMerges
	if m.UnkToken != nil {
		out.Model.UnkToken = *m.UnkToken
	}
	if m.ContinuingSubwordPrefix != nil {
		out.Model.ContinuingSubwordPrefix = *m.ContinuingSubwordPrefix
	}
	if m.EndOfWordSuffix != nil {
		out.Model.EndOfWordSuffix = *m.EndOfWordSuffix
	}
	if out.Model.Type != "BPE" {
		return out, nil // reported by the tokenizer builder, which knows what it supports
	}
	if len(m.Vocab) == 0 || bytes.Equal(bytes.TrimSpace(m.Vocab), []byte("null")) {
		return nil, fmt.Errorf("field model.vocab: missing")
	}
	if err := json.Unmarshal(m.Vocab, &out.Model.Vocab); err != nil {
		return nil, fmt.Errorf("field model.vocab: %w", err)
	}
	for tok, id := range out.Model.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("field model.vocab: token %q has negative id %d", tok, id)
		}
	}
	out.Model.Merges = make([][2]string, len(m.Merges))
	for i, rm := range m.Merges {
		pair, err := parseMerge(rm)
		if err != nil {
			return nil, fmt.Errorf("field model.merges[%d]: %w", i, err)
		}
		out.Model.Merges[i] = pair
	}
	for i, at := range out.AddedTokens {
		if at.Content == "" || at.ID < 0 {
			return nil, fmt.Errorf("field added_tokens[%d]: empty content or negative id", i)
		}
	}
	return out, nil
}

// parseMerge accepts "a b" and ["a", "b"].
func parseMerge(rm json.RawMessage) ([2]string, error) {
	var s string
	if err := json.Unmarshal(rm, &s); err == nil {
		a, b, ok := strings.Cut(s, " ")
		if !ok || a == "" || b == "" || strings.Contains(b, " ") {
			return [2]string{}, fmt.Errorf("merge %q is not two space-separated tokens", s)
		}
		return [2]string{a, b}, nil
	}
	var l []string
	if err := json.Unmarshal(rm, &l); err != nil {
		return [2]string{}, fmt.Errorf("merge is neither a string nor a list of strings: %s", truncate(rm))
	}
	if len(l) != 2 || l[0] == "" || l[1] == "" {
		return [2]string{}, fmt.Errorf("merge list %q must hold two non-empty tokens", l)
	}
	return [2]string{l[0], l[1]}, nil
}

func truncate(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "…"
	}
	return string(b)
}
