package demo

import (
	"cmp"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"unicode"
)

// Special tokens of the demo tokenizer, at the top of the vocabulary in
// this order.
var specialTokens = []string{"<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"}

// gpt2Pattern is GPT-2's pre-tokenizer regex (written into tokenizer.json;
// the engine's tokenizer implements it).
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// corpus is the text the BPE merges are learned from.
const corpus = `Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends.
One day, she saw a big red ball under a tree. "Can I play with it?" she asked her mother. Her mother smiled and said yes.
The sun was warm and the sky was blue. The children ran and laughed all day long, and when the evening came they went home happy.
The model reads the prompt, computes the next token, and the server streams it back to the client as soon as it is ready.
Large language models are trained on text; they learn to predict what comes next. Serving them well means batching many
requests together, caching keys and values, and never making a fast client wait for a slow one.
In the morning the cat sat on the mat, and the dog slept by the door. The bird sang a song about the river and the mountain.
He said: "I think we should go now." She replied: "Yes, let's go to the market and buy some bread, milk and apples."
The quick brown fox jumps over the lazy dog. 1 2 3 4 5 6 7 8 9 10 100 2024 3.14 42
What is the capital of France? The capital of France is Paris. What is two plus two? Two plus two is four.
def main(): print("hello, world") # a small program that prints a greeting
Thank you for your question. Here is a short answer, and then a longer explanation with examples.`

// byteUnicode is GPT-2's bytes_to_unicode table: printable bytes map to
// themselves, the others to code points from 256 up.
func byteUnicode() [256]rune {
	var t [256]rune
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			t[b] = rune(b)
		} else {
			t[b] = rune(256 + n)
			n++
		}
	}
	return t
}

// pretokenize splits text roughly as GPT-2's regex does (words with their
// leading space, number runs, punctuation runs, whitespace). It is only
// used to learn merges, so approximations are harmless.
func pretokenize(text string) []string {
	var out []string
	rs := []rune(text)
	class := func(r rune) int {
		switch {
		case unicode.IsLetter(r):
			return 1
		case unicode.IsNumber(r):
			return 2
		case unicode.IsSpace(r):
			return 3
		}
		return 4
	}
	for i := 0; i < len(rs); {
		j := i
		if rs[j] == ' ' && j+1 < len(rs) && class(rs[j+1]) != 3 {
			j++
		}
		c := class(rs[j])
		k := j + 1
		for k < len(rs) && class(rs[k]) == c {
			k++
		}
		out = append(out, string(rs[i:k]))
		i = k
	}
	return out
}

// bpeTokenizer is a byte-level BPE vocabulary: tokens in id order (as
// byte-level unicode strings) and merges in rank order.
type bpeTokenizer struct {
	tokens []string
	merges [][2]string
}

// buildTokenizer makes a byte-level BPE tokenizer of exactly vocab ids:
// 256 byte tokens, merges learned from corpus, synthetic merges (letter
// tokens glued together, drawn from a fixed-seed generator) to fill, then
// the special tokens.
func buildTokenizer(vocab int) *bpeTokenizer {
	bu := byteUnicode()
	t := &bpeTokenizer{}
	have := map[string]bool{}
	for b := 0; b < 256; b++ {
		s := string(bu[b])
		t.tokens = append(t.tokens, s)
		have[s] = true
	}
	want := vocab - len(specialTokens)

	// learn merges from the corpus
	freq := map[string]int{}
	for _, w := range pretokenize(corpus) {
		freq[w]++
	}
	type word struct {
		syms []string
		n    int
	}
	var words []word
	for w, n := range freq {
		var syms []string
		for _, b := range []byte(w) {
			syms = append(syms, string(bu[b]))
		}
		words = append(words, word{syms, n})
	}
	slices.SortFunc(words, func(a, b word) int { return cmp.Compare(strings.Join(a.syms, ""), strings.Join(b.syms, "")) })
	for len(t.tokens) < want {
		counts := map[[2]string]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w.syms); i++ {
				counts[[2]string{w.syms[i], w.syms[i+1]}] += w.n
			}
		}
		var best [2]string
		bestN := 1
		for p, n := range counts {
			if n > bestN || (n == bestN && n > 1 && (p[0] < best[0] || (p[0] == best[0] && p[1] < best[1]))) {
				best, bestN = p, n
			}
		}
		if bestN < 2 {
			break
		}
		merged := best[0] + best[1]
		t.merges = append(t.merges, best)
		if !have[merged] {
			have[merged] = true
			t.tokens = append(t.tokens, merged)
		}
		for wi := range words {
			s := words[wi].syms
			out := s[:0]
			for i := 0; i < len(s); i++ {
				if i+1 < len(s) && s[i] == best[0] && s[i+1] == best[1] {
					out = append(out, merged)
					i++
				} else {
					out = append(out, s[i])
				}
			}
			words[wi].syms = out
		}
	}

	// fill with synthetic merges of letter tokens
	isLetters := func(s string, allowSpace bool) bool {
		for i, r := range s {
			if r == 'Ġ' && i == 0 && allowSpace {
				continue
			}
			if !(r >= 'a' && r <= 'z') {
				return false
			}
		}
		return s != "" && s != "Ġ"
	}
	var left, right []string
	for _, s := range t.tokens {
		if isLetters(s, true) {
			left = append(left, s)
		}
		if isLetters(s, false) {
			right = append(right, s)
		}
	}
	rng := rand.New(rand.NewPCG(0x5eed, 0xb9e))
	for len(t.tokens) < want {
		a, b := left[rng.IntN(len(left))], right[rng.IntN(len(right))]
		m := a + b
		if have[m] || len(m) > 12 {
			continue
		}
		have[m] = true
		t.merges = append(t.merges, [2]string{a, b})
		t.tokens = append(t.tokens, m)
		left = append(left, m)
		if isLetters(m, false) {
			right = append(right, m)
		}
	}
	t.tokens = append(t.tokens, specialTokens...)
	return t
}

// tokenizerJSON renders the Hugging Face tokenizer.json.
func (t *bpeTokenizer) tokenizerJSON() ([]byte, error) {
	nb := len(t.tokens) - len(specialTokens)
	vocab := make(map[string]int, nb)
	for id, s := range t.tokens[:nb] {
		vocab[s] = id
	}
	var added []map[string]any
	for i, s := range specialTokens {
		added = append(added, map[string]any{"id": nb + i, "content": s, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true})
	}
	merges := make([]string, len(t.merges))
	for i, m := range t.merges {
		merges[i] = m[0] + " " + m[1]
	}
	doc := map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": added,
		"normalizer":   nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": gpt2Pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": merges},
	}
	return json.MarshalIndent(doc, "", " ")
}

// chatTemplate is ChatML.
const chatTemplate = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// tokenizerConfigJSON renders tokenizer_config.json.
func (t *bpeTokenizer) tokenizerConfigJSON() ([]byte, error) {
	nb := len(t.tokens) - len(specialTokens)
	dec := map[string]any{}
	for i, s := range specialTokens {
		dec[itoa(nb+i)] = map[string]any{"content": s, "lstrip": false, "normalized": false, "rstrip": false, "single_word": false, "special": true}
	}
	doc := map[string]any{
		"added_tokens_decoder":         dec,
		"bos_token":                    specialTokens[0],
		"eos_token":                    specialTokens[3],
		"pad_token":                    specialTokens[1],
		"add_bos_token":                false,
		"clean_up_tokenization_spaces": false,
		"model_max_length":             2048,
		"tokenizer_class":              "PreTrainedTokenizerFast",
		"chat_template":                chatTemplate,
	}
	return json.MarshalIndent(doc, "", " ")
}
