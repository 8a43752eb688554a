// Package tokenizer encodes text to token ids and decodes them back, exactly as
// the model's own tokenizer does.
//
// Contract shared with the rest of the frontend (detok, stop strings, guided
// decoding, chat templates): see the Tokenizer interface. Implementations live
// beside it (byte-level BPE, SentencePiece-style BPE).
package tokenizer

// Tokenizer is what the rest of Sluice needs of a model's tokenizer. It is
// safe for concurrent use by many goroutines.
type Tokenizer interface {
	// Encode returns the token ids of text. With addSpecial the tokenizer adds
	// what its post-processor adds (for example BOS for Llama-2).
	// Special/added tokens written literally in text are matched.
	Encode(text string, addSpecial bool) []int32
	// Decode returns the text of ids; skipSpecial drops special tokens.
	Decode(ids []int32, skipSpecial bool) string
	// TokenBytes returns the raw bytes token id stands for once decoded in
	// the middle of a sequence (byte-level mapping undone, "▁" as a space,
	// <0xNN> as that byte). Used by the incremental detokenizer and by
	// constrained decoding. Special tokens return their literal text.
	TokenBytes(id int32) []byte
	// IsSpecial reports whether id is a special (control) token.
	IsSpecial(id int32) bool
	// VocabSize is the number of ids (model vocab plus added tokens).
	VocabSize() int
	// BOS and EOS ids, -1 if the model has none.
	BOS() int32
	EOS() int32
	// TokenID looks up the id of a token's literal text (for example
	// "<|im_end|>"), reporting whether it exists.
	TokenID(tok string) (int32, bool)
}
