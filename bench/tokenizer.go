package main

import (
	"fmt"

	"github.com/sluice-llm/sluice/bench/dataset"
	"github.com/sluice-llm/sluice/text/tokenizer"
)

// loadTokenizer loads the tokenizer --tokenizer names with Sluice's loader:
// a Hugging Face directory, a tokenizer.json, a .gguf file or a llama2.c
// tokenizer.bin.
func loadTokenizer(path string) (dataset.Tokenizer, error) {
	tok, err := tokenizer.Load("", path)
	if err != nil {
		return nil, fmt.Errorf("--tokenizer %s: %w", path, err)
	}
	return tok, nil
}
