// Package tokenizer encodes text to token ids and decodes them back, exactly as
// the model's own tokenizer does.
//
// Contract shared with the rest of the frontend (detok, stop strings, guided
// decoding, chat templates): see the Tokenizer interface. The implementation
// is Model, built by Load (dispatching on the path), LoadDir (Hugging Face
// layout), LoadTokenizerJSON, LoadGGUF and LoadLlama2C. It covers:
//
//   - byte-level BPE (GPT-2, Llama-3, Qwen2/3, and GGUF "gpt2" vocabularies)
//     with ranked merges;
//   - character BPE with byte fallback (Llama-2/Mistral-style tokenizer.json);
//   - SentencePiece-style BPE merged by token score (GGUF "llama"
//     vocabularies and llama2.c tokenizer.bin), following llama.cpp's
//     llm_tokenizer_spm;
//
// with added/special tokens matched before the model, and the post-processor's
// BOS/EOS. It is conformance-tested against llama.cpp's test-tokenizer-0
// vectors and llama2.c's test vectors (see exact_test.go).
//
// Why hand-written: no pure-Go library is both exact and fast.
// github.com/sugarme/tokenizer cannot load Llama-3 or Qwen3 (their split regex
// uses the lookahead \s+(?!\S), which Go's regexp lacks) and has no byte
// fallback; ollama's tokenizer diverges on about 0.003% of tokens and runs at
// about 1 MB/s (see design/dependencies.md §3a). Here the known split regexes
// (GPT-2, Llama-3, Qwen2) are matched by hand-written code recognised from the
// pattern string; any other pattern falls back to github.com/dlclark/regexp2,
// which supports lookaround and is exact but slower. Merges run over token ids
// with a per-pre-token cache that is sharded and bounded, so a Model is safe
// for concurrent use.
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
