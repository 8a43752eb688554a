package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
)

// FileOptions configure the ShareGPT and custom datasets.
type FileOptions struct {
	NumPrompts int
	// OutputLen, when > 0, overrides the output length: for ShareGPT the
	// length of the recorded answer, for custom files the per-line
	// "output_tokens" (default 256 when neither is set).
	OutputLen int
}

// defaultCustomOutputLen is vLLM's --custom-output-len default.
const defaultCustomOutputLen = 256

// conversation is one ShareGPT record.
type conversation struct {
	Conversations []struct {
		From  string `json:"from"`
		Value string `json:"value"`
	} `json:"conversations"`
}

// ParseShareGPT reads a ShareGPT-format JSON array and returns the (prompt,
// answer) pairs of conversations with at least two turns.
func ParseShareGPT(r io.Reader) ([][2]string, error) {
	var convs []conversation
	if err := json.NewDecoder(r).Decode(&convs); err != nil {
		return nil, fmt.Errorf("decode ShareGPT JSON: %w", err)
	}
	pairs := make([][2]string, 0, len(convs))
	for _, c := range convs {
		if len(c.Conversations) >= 2 {
			pairs = append(pairs, [2]string{c.Conversations[0].Value, c.Conversations[1].Value})
		}
	}
	return pairs, nil
}

// ShareGPT samples NumPrompts (prompt, answer) pairs in a seeded random
// order, skipping ones vLLM's is_valid_sequence rejects (prompt or answer
// under 4 tokens, prompt over 1024, total over 2048) when the output length
// is not overridden.
func ShareGPT(pairs [][2]string, o FileOptions, tok Tokenizer, rng *rand.Rand) ([]Sample, error) {
	order := rng.Perm(len(pairs))
	var out []Sample
	for _, i := range order {
		if len(out) == o.NumPrompts {
			break
		}
		prompt, answer := pairs[i][0], pairs[i][1]
		pl := CountTokens(tok, prompt)
		ol := o.OutputLen
		if ol <= 0 {
			ol = CountTokens(tok, answer)
			if pl < 4 || ol < 4 || pl > 1024 || pl+ol > 2048 {
				continue
			}
		}
		out = append(out, Sample{Prompt: prompt, PromptLen: pl, OutputLen: ol})
	}
	if len(out) == 0 {
		return nil, errors.New("sharegpt dataset: no usable conversations")
	}
	return out, nil
}

// CustomRecord is one prompt of a custom dataset.
type CustomRecord struct {
	// Prompt is the prompt text (required).
	Prompt *string `json:"prompt"`
	// OutputTokens, when > 0, is max_tokens for this prompt.
	OutputTokens int `json:"output_tokens"`
}

// ParseCustom reads prompts as JSONL ({"prompt": …} per line, optional
// "output_tokens") or as one JSON array of such objects.
func ParseCustom(r io.Reader) ([]CustomRecord, error) {
	br := bufio.NewReader(r)
	first, err := peekNonSpace(br)
	if err != nil {
		return nil, fmt.Errorf("read custom dataset: %w", err)
	}
	var recs []CustomRecord
	if first == '[' {
		if err := json.NewDecoder(br).Decode(&recs); err != nil {
			return nil, fmt.Errorf("decode custom dataset JSON array: %w", err)
		}
	} else {
		sc := bufio.NewScanner(br)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for line := 1; sc.Scan(); line++ {
			b := bytes.TrimSpace(sc.Bytes())
			if len(b) == 0 {
				continue
			}
			var rec CustomRecord
			if err := json.Unmarshal(b, &rec); err != nil {
				return nil, fmt.Errorf("decode custom dataset line %d: %w", line, err)
			}
			recs = append(recs, rec)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("read custom dataset: %w", err)
		}
	}
	for i, rec := range recs {
		if rec.Prompt == nil {
			return nil, fmt.Errorf("custom dataset record %d: no \"prompt\" string", i+1)
		}
		if rec.OutputTokens < 0 {
			return nil, fmt.Errorf("custom dataset record %d: negative output_tokens", i+1)
		}
	}
	return recs, nil
}

// peekNonSpace returns the first non-space byte without consuming it.
func peekNonSpace(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.Peek(1)
		if err != nil {
			return 0, err
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			if _, err := br.Discard(1); err != nil {
				return 0, err
			}
		default:
			return b[0], nil
		}
	}
}

// Custom returns the first NumPrompts records, in file order, cycling when
// the file holds fewer.
func Custom(recs []CustomRecord, o FileOptions, tok Tokenizer) ([]Sample, error) {
	if len(recs) == 0 {
		return nil, errors.New("custom dataset: no prompts")
	}
	out := make([]Sample, o.NumPrompts)
	for i := range out {
		rec := recs[i%len(recs)]
		ol := o.OutputLen
		if ol <= 0 {
			ol = rec.OutputTokens
		}
		if ol <= 0 {
			ol = defaultCustomOutputLen
		}
		out[i] = Sample{Prompt: *rec.Prompt, PromptLen: CountTokens(tok, *rec.Prompt), OutputLen: ol}
	}
	return out, nil
}

// Load builds samples for a file-backed dataset: name is "sharegpt" or
// "custom".
func Load(name, path string, o FileOptions, tok Tokenizer, rng *rand.Rand) ([]Sample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open dataset: %w", err)
	}
	defer f.Close()
	switch name {
	case "sharegpt":
		pairs, err := ParseShareGPT(f)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", path, err)
		}
		return ShareGPT(pairs, o, tok, rng)
	case "custom":
		recs, err := ParseCustom(f)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", path, err)
		}
		return Custom(recs, o, tok)
	}
	return nil, fmt.Errorf("unknown dataset %q", name)
}
