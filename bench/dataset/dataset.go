// Package dataset builds the prompts a serving benchmark sends, as vLLM's
// benchmark does (vllm/benchmarks/datasets): random prompts of set token
// lengths, ShareGPT conversations, or a custom file of prompts.
package dataset

import (
	"math"
	"strings"
)

// Sample is one request to send.
type Sample struct {
	// Prompt is the prompt text; empty when PromptIDs is used.
	Prompt string
	// PromptIDs, when non-nil, is sent as a list of token ids (valid for
	// /v1/completions only).
	PromptIDs []int32
	// PromptLen is the prompt's length in tokens (approximate without a
	// tokenizer; the server's usage figure replaces it when reported).
	PromptLen int
	// OutputLen is max_tokens for the request.
	OutputLen int
}

// Tokenizer is what the datasets need of a tokenizer. The Sluice tokenizer
// (text/tokenizer.Tokenizer) satisfies it.
type Tokenizer interface {
	Encode(text string, addSpecial bool) []int32
	Decode(ids []int32, skipSpecial bool) string
	VocabSize() int
	IsSpecial(id int32) bool
}

// CountTokens returns the number of tokens of text: tok's count when tok is
// non-nil, else an estimate of one token per four bytes (at least one per
// word), the usual rule of thumb for English text with BPE vocabularies.
func CountTokens(tok Tokenizer, text string) int {
	if tok != nil {
		return len(tok.Encode(text, false))
	}
	return ApproxTokens(text)
}

// ApproxTokens estimates the token count of text without a tokenizer.
func ApproxTokens(text string) int {
	byBytes := int(math.Ceil(float64(len(text)) / 4))
	return max(byBytes, len(strings.Fields(text)))
}

// WordTokenizer is a stand-in tokenizer for when no model tokenizer can be
// loaded: one token per whitespace-separated word, ids indexing a fixed list
// of common English words (unknown words share the last id). Counts from it
// approximate BPE counts for plain English prose only.
type WordTokenizer struct{}

// Encode returns one id per word of text.
func (WordTokenizer) Encode(text string, _ bool) []int32 {
	words := strings.Fields(text)
	ids := make([]int32, len(words))
	for i, w := range words {
		ids[i] = int32(len(commonWords))
		if id, ok := commonWordIDs[w]; ok {
			ids[i] = id
		}
	}
	return ids
}

// Decode joins the words of ids with spaces; unknown ids read "?".
func (WordTokenizer) Decode(ids []int32, _ bool) string {
	words := make([]string, len(ids))
	for i, id := range ids {
		words[i] = "?"
		if id >= 0 && int(id) < len(commonWords) {
			words[i] = commonWords[id]
		}
	}
	return strings.Join(words, " ")
}

// VocabSize is the number of common words plus the unknown id.
func (WordTokenizer) VocabSize() int { return len(commonWords) + 1 }

// IsSpecial reports the unknown-word id as special, so random prompts never
// use it.
func (WordTokenizer) IsSpecial(id int32) bool { return int(id) >= len(commonWords) }
