// Package detok turns a stream of generated token ids into a stream of text
// deltas (the incremental detokenizer of the output processor).
//
// A Decoder is fed the new token ids of one completion as they arrive. Each
// Add returns the text that has become stable: bytes of an incomplete UTF-8
// sequence (for example a partial run of SentencePiece <0xNN> byte-fallback
// tokens, or a byte-level BPE token holding half a character) are held back
// until the sequence completes; Flush releases whatever is left at the end,
// an incomplete sequence as U+FFFD. Invalid bytes become U+FFFD per maximal
// ill-formed subsequence, as Hugging Face decoding does. The concatenation of
// all deltas equals tok.Decode(ids, skipSpecial) for the same ids (where the
// bytes are not well-formed UTF-8: HF's lossy decoding of them).
//
// SentencePiece tokenizers strip one leading space from the start of the
// decoded text. When Options.PromptIDs holds the prompt, generated text
// continues it, so the first generated token keeps its leading space, as
// vLLM's prefix-offset detokenizer does; without a prompt the Decoder
// follows the tokenizer and strips it (probing tok.Decode once).
//
// In steady state Add allocates nothing but the returned string, and not
// even that for a single token whose text is complete, well-formed UTF-8
// when the tokenizer shares its token texts as strings (TokenStringer, as
// tokenizer.Model does). A Decoder is not safe for concurrent use; use one
// per completion.
package detok

import (
	"unicode/utf8"

	"github.com/sluice-llm/sluice/text/tokenizer"
)

// TokenStringer is a tokenizer that can return a token's text
// (TokenBytes) as a string without copying: the string must stay valid
// and unchanged for the tokenizer's life, since deltas may keep it.
// tokenizer.Model implements it.
type TokenStringer interface {
	TokenString(id int32) string
}

// Options configure a Decoder.
type Options struct {
	// SkipSpecial drops special tokens (skip_special_tokens).
	SkipSpecial bool
	// PromptIDs are the prompt's token ids; generated text continues them
	// (leading-space handling, and completing a UTF-8 sequence the prompt
	// left open). Only their tail is read; the slice is not retained.
	PromptIDs []int32
}

// Decoder is the incremental detokenizer state of one completion.
type Decoder struct {
	tok  tokenizer.Tokenizer
	skip bool
	// pending holds bytes not yet emitted: a truncated UTF-8 sequence.
	pending []byte
	// out is scratch space for building the returned text.
	out []byte
	// atStart is true until the first token with text; it is where a
	// SentencePiece decoder strips a leading space.
	atStart bool
	probe   [1]int32
	// strs is tok as a TokenStringer, or nil.
	strs TokenStringer
}

// New returns a Decoder for tok.
func New(tok tokenizer.Tokenizer, opts Options) *Decoder {
	// pending and out are made on first use: a stream of whole tokens from
	// a TokenStringer needs neither (two allocations fewer per completion).
	d := &Decoder{
		tok:     tok,
		skip:    opts.SkipSpecial,
		atStart: true,
	}
	d.strs, _ = tok.(TokenStringer)
	d.primePrompt(opts.PromptIDs)
	return d
}

// primePrompt reads the prompt's tail: any text there means the output is
// not at the start of the sequence, and a UTF-8 sequence the prompt leaves
// open is carried into pending so the output completes it.
//
// Only the tail's last 4 bytes are kept (completeLen looks at the last 3):
// they are gathered right-aligned in an array, so a completion's start
// allocates nothing here.
func (d *Decoder) primePrompt(prompt []int32) {
	var buf [4]byte
	k := 0 // the tail is buf[len(buf)-k:]
	for i := len(prompt) - 1; i >= 0 && k < len(buf); i-- {
		id := prompt[i]
		if d.skip && d.tok.IsSpecial(id) {
			continue
		}
		b := d.tok.TokenBytes(id)
		if len(b) == 0 {
			continue
		}
		d.atStart = false
		m := min(len(b), len(buf)-k)
		copy(buf[len(buf)-k-m:], b[len(b)-m:])
		k += m
	}
	tail := buf[len(buf)-k:]
	if n := completeLen(tail); n < len(tail) {
		d.pending = append(d.pending, tail[n:]...)
	}
}

// Add appends ids, the next generated tokens, and returns the text that is
// now stable (possibly ""). The returned string is the only allocation.
func (d *Decoder) Add(ids []int32) string {
	// Fast path: one token, nothing pending, text complete.
	if len(ids) == 1 && len(d.pending) == 0 && !d.atStart {
		id := ids[0]
		if d.skip && d.tok.IsSpecial(id) {
			return ""
		}
		b := d.tok.TokenBytes(id)
		if n := completeLen(b); n == len(b) {
			if d.strs != nil && utf8.Valid(b) {
				// The text as it is (appendLossy would copy it unchanged),
				// shared with the tokenizer: no allocation.
				return d.strs.TokenString(id)
			}
			if d.out = appendLossy(d.scratch(), b); len(d.out) == 0 {
				return ""
			}
			return string(d.out)
		}
	}
	for _, id := range ids {
		if d.skip && d.tok.IsSpecial(id) {
			continue
		}
		b := d.tok.TokenBytes(id)
		if len(b) == 0 {
			continue
		}
		if d.atStart {
			d.atStart = false
			if b[0] == ' ' && d.stripsLeadingSpace(id, b) {
				b = b[1:]
			}
		}
		d.pending = append(d.pending, b...)
	}
	n := completeLen(d.pending)
	if n == 0 {
		return ""
	}
	d.out = appendLossy(d.scratch(), d.pending[:n])
	d.pending = d.pending[:copy(d.pending, d.pending[n:])]
	return string(d.out)
}

// scratch returns out emptied, making it on first use.
func (d *Decoder) scratch() []byte {
	if d.out == nil {
		d.out = make([]byte, 0, 64)
	}
	return d.out[:0]
}

// stripsLeadingSpace reports whether the tokenizer drops the leading space
// of token id (bytes b, b[0] == ' ') when it starts the decoded text, as
// SentencePiece decoders do. It costs one Decode call, made once.
func (d *Decoder) stripsLeadingSpace(id int32, b []byte) bool {
	d.probe[0] = id
	got := d.tok.Decode(d.probe[:], d.skip)
	return got == string(appendLossy(nil, b[1:])) && got != string(appendLossy(nil, b))
}

// Flush returns the held-back remainder at the end of generation (an
// incomplete UTF-8 sequence becomes U+FFFD) and clears it.
func (d *Decoder) Flush() string {
	if len(d.pending) == 0 {
		return ""
	}
	d.out = appendLossy(d.scratch(), d.pending)
	d.pending = d.pending[:0]
	return string(d.out)
}

// Pending reports how many bytes are held back.
func (d *Decoder) Pending() int { return len(d.pending) }

// DetokenizableIDs applies vLLM's rule for the token that ended generation:
// when the completion finished because it sampled a stop token (EOS or one
// of stop_token_ids), that token's text is not part of the output unless
// include_stop_str_in_output is set. It returns the ids whose text belongs
// to the output: ids without its last element in that case, ids otherwise.
// The token id itself still belongs in the completion's token_ids.
func DetokenizableIDs(ids []int32, finishedByStopToken, includeStopStr bool) []int32 {
	if finishedByStopToken && !includeStopStr && len(ids) > 0 {
		return ids[:len(ids)-1]
	}
	return ids
}
