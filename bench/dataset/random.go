package dataset

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// RandomOptions configure random prompts (vLLM's --dataset-name random).
type RandomOptions struct {
	NumPrompts int
	InputLen   int
	OutputLen  int
	// RangeRatio r draws lengths uniformly from [len·(1−r), len·(1+r)].
	RangeRatio float64
	// PromptIDs sends token ids instead of text when no tokenizer is given
	// (completions endpoint only).
	PromptIDs bool
}

// Random ids are drawn from [minRandomID, maxRandomID) without a tokenizer:
// ordinary vocabulary entries of every common model, clear of special ids.
const (
	minRandomID = 1000
	maxRandomID = 30000
)

// Validate reports options no dataset can satisfy.
func (o RandomOptions) Validate() error {
	switch {
	case o.NumPrompts < 1:
		return errors.New("random dataset: --num-prompts must be at least 1")
	case o.InputLen < 1:
		return errors.New("random dataset: --random-input-len must be at least 1")
	case o.OutputLen < 1:
		return errors.New("random dataset: --random-output-len must be at least 1")
	case o.RangeRatio < 0 || o.RangeRatio >= 1 || math.IsNaN(o.RangeRatio):
		return errors.New("random dataset: --random-range-ratio must be in [0, 1)")
	}
	return nil
}

// Random returns NumPrompts samples. With a tokenizer the prompts are text
// decoded from random non-special token ids and fitted to the drawn length by
// re-encoding, as vLLM does. Without one they are random token ids in [1000,
// 30000) when PromptIDs is set, else text of random common words (roughly a
// token each).
func Random(o RandomOptions, tok Tokenizer, rng *rand.Rand) ([]Sample, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	special := 0
	if tok != nil {
		special = len(tok.Encode("", true))
	}
	samples := make([]Sample, o.NumPrompts)
	for i := range samples {
		in := max(drawLen(o.InputLen, o.RangeRatio, rng)-special, 1)
		out := max(drawLen(o.OutputLen, o.RangeRatio, rng), 1)
		s := Sample{OutputLen: out, PromptLen: in}
		switch {
		case tok != nil:
			text, n, err := tokenPrompt(tok, in, rng)
			if err != nil {
				return nil, err
			}
			s.Prompt, s.PromptLen = text, n+special
		case o.PromptIDs:
			s.PromptIDs = make([]int32, in)
			for j := range s.PromptIDs {
				s.PromptIDs[j] = int32(minRandomID + rng.IntN(maxRandomID-minRandomID))
			}
		default:
			s.Prompt = wordPrompt(in, rng)
		}
		samples[i] = s
	}
	return samples, nil
}

// drawLen draws an integer uniformly from [floor(n·(1−r)), ceil(n·(1+r))].
func drawLen(n int, r float64, rng *rand.Rand) int {
	lo := int(math.Floor(float64(n) * (1 - r)))
	hi := int(math.Ceil(float64(n) * (1 + r)))
	if hi <= lo {
		return lo
	}
	return lo + rng.IntN(hi-lo+1)
}

// tokenPrompt returns text that encodes to about n tokens, built from
// consecutive non-special ids after a random offset, and its token count.
func tokenPrompt(tok Tokenizer, n int, rng *rand.Rand) (string, int, error) {
	vocab := tok.VocabSize()
	if vocab <= 0 {
		return "", 0, errors.New("random dataset: tokenizer has an empty vocabulary")
	}
	offset := rng.IntN(vocab)
	next := func() int32 {
		for range vocab {
			id := int32(offset % vocab)
			offset++
			if !tok.IsSpecial(id) {
				return id
			}
		}
		return 0
	}
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = next()
	}
	// Decoding and re-encoding changes the count; trim or extend, a few
	// rounds, like vLLM's gen_prompt_decode_to_target_len.
	text := tok.Decode(ids, true)
	for range 10 {
		ids = tok.Encode(text, false)
		if len(ids) == n {
			break
		}
		if len(ids) > n {
			ids = ids[:n]
		} else {
			for len(ids) < n {
				ids = append(ids, next())
			}
		}
		text = tok.Decode(ids, true)
	}
	count := len(tok.Encode(text, false))
	if count == 0 {
		return "", 0, fmt.Errorf("random dataset: could not build a %d-token prompt", n)
	}
	return text, count, nil
}

// wordPrompt returns n random common words.
func wordPrompt(n int, rng *rand.Rand) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(commonWords[rng.IntN(len(commonWords))])
	}
	return b.String()
}

// commonWords are frequent English words that are one token in the usual
// BPE and SentencePiece vocabularies.
var commonWords = strings.Fields(`the of and to in is you that it he was for on are as with his they at be
this have from or one had by word but not what all were we when your can said there use an each which she do
how their if will up other about out many then them these so some her would make like him into time has look
two more write go see number no way could people my than first water been call who oil its now find long down
day did get come made may part over new sound take only little work know place year live me back give most
very after thing our just name good sentence man think say great where help through much before line right
too mean old any same tell boy follow came want show also around form three small set put end does another
well large must big even such because turn here why ask went men read need land different home us move try
kind hand picture again change off play spell air away animal house point page letter mother answer found
study still learn should world high every near add food between own below country plant last school father
keep tree never start city earth eye light thought head under story saw left few while along might close
something seem next hard open example begin life always those both paper together got group often run`)

// commonWordIDs maps each common word to its index (read-only after init).
var commonWordIDs = func() map[string]int32 {
	m := make(map[string]int32, len(commonWords))
	for i, w := range commonWords {
		if _, dup := m[w]; !dup {
			m[w] = int32(i)
		}
	}
	return m
}()
