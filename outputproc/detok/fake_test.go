package detok

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// fakeTok is a small tokenizer.Tokenizer for tests. Its Decode follows
// Hugging Face: concatenate token bytes (special tokens as their literal text
// unless skipped), decode UTF-8 lossily, and for SentencePiece-like
// vocabularies strip one leading space of the result.
type fakeTok struct {
	pieces  []string // display form, e.g. "▁the" or "<0xE2>"
	bytes   [][]byte // TokenBytes
	special []bool
	spm     bool
	bos     int32
	eos     int32
}

func (f *fakeTok) Encode(text string, addSpecial bool) []int32 { panic("not used") }

func (f *fakeTok) Decode(ids []int32, skipSpecial bool) string {
	var b []byte
	for _, id := range ids {
		if id < 0 || int(id) >= len(f.bytes) || (skipSpecial && f.special[id]) {
			continue
		}
		b = append(b, f.bytes[id]...)
	}
	s := string(appendLossyRef(b))
	if f.spm {
		s = strings.TrimPrefix(s, " ")
	}
	return s
}

func (f *fakeTok) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= len(f.bytes) {
		return nil
	}
	return f.bytes[id]
}

func (f *fakeTok) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(f.special) && f.special[id]
}
func (f *fakeTok) VocabSize() int { return len(f.bytes) }
func (f *fakeTok) BOS() int32     { return f.bos }
func (f *fakeTok) EOS() int32     { return f.eos }
func (f *fakeTok) TokenID(tok string) (int32, bool) {
	for i, p := range f.pieces {
		if p == tok {
			return int32(i), true
		}
	}
	return -1, false
}

func (f *fakeTok) add(piece string, b []byte, special bool) {
	f.pieces = append(f.pieces, piece)
	f.bytes = append(f.bytes, b)
	f.special = append(f.special, special)
}

// appendLossyRef is an independent reference for lossy UTF-8 decoding
// (maximal ill-formed subsequences become U+FFFD), written with the standard
// library's rune decoding and utf8.FullRune.
func appendLossyRef(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		n := validPrefixRef(b[i:])
		if n > 0 {
			out = append(out, b[i:i+n]...)
			i += n
			continue
		}
		// Maximal subpart: the longest prefix of b[i:] that is a prefix of
		// some valid sequence, at least one byte.
		k := 1
		for k < len(b)-i && k < 4 && isPrefixOfValid(b[i:i+k+1]) {
			k++
		}
		out = append(out, "\uFFFD"...)
		i += k
	}
	return out
}

// validPrefixRef returns the byte length of the leading valid runes of b.
func validPrefixRef(b []byte) int {
	n := 0
	for n < len(b) {
		r := []rune(string(b[n:min(len(b), n+4)]))[0]
		w := len(string(r))
		if r == '\uFFFD' && string(b[n:min(len(b), n+3)]) != "\uFFFD" {
			return n
		}
		n += w
	}
	return n
}

// isPrefixOfValid reports whether b is a proper prefix of some valid UTF-8
// encoding of a rune (the standard library calls such a b not a full rune).
func isPrefixOfValid(b []byte) bool { return !utf8.FullRune(b) }

// newByteLevelFake builds a byte-level BPE-like vocabulary: all 256 single
// bytes, some words, tokens holding parts of multi-byte characters, and
// special tokens.
func newByteLevelFake() *fakeTok {
	f := &fakeTok{bos: -1}
	for i := range 256 {
		f.add(fmt.Sprintf("b%02X", i), []byte{byte(i)}, false)
	}
	for _, w := range []string{" the", " cat", "Hello", " world", "é", " é", "\xE2\x82", "\xAC!", "\xF0\x9F", "\x98\x80", "日本", "\n\n", "  "} {
		f.add(w, []byte(w), false)
	}
	f.eos = int32(len(f.bytes))
	f.add("<|end|>", []byte("<|end|>"), true)
	f.add("<|im_start|>", []byte("<|im_start|>"), true)
	return f
}

// newSPMFake builds a SentencePiece-like vocabulary with "▁" word
// boundaries and <0xNN> byte-fallback tokens.
func newSPMFake() *fakeTok {
	f := &fakeTok{spm: true}
	f.add("<unk>", nil, true)
	f.bos = 1
	f.add("<s>", []byte("<s>"), true)
	f.eos = 2
	f.add("</s>", []byte("</s>"), true)
	for i := range 256 {
		f.add(fmt.Sprintf("<0x%02X>", i), []byte{byte(i)}, false)
	}
	for _, p := range []string{"▁", "▁the", "▁Hello", "lo", "é", "▁é", "▁▁", "ab", "日", "▁world", "."} {
		f.add(p, []byte(strings.ReplaceAll(p, "▁", " ")), false)
	}
	return f
}
