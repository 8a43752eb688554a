package tokenizer

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// PatternO200k is o200k_base's split regex (GPT-4o, gpt-oss's
// o200k_harmony), as tiktoken and gpt-oss's tokenizer.json give it.
const PatternO200k = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// o200k character classes. A rune may have several.
const (
	oUpper  = 1 << iota // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	oLower              // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	oLetter             // \p{L}
	oNum                // \p{N}
	oSpace              // \s
	oCRLF               // [\r\n]
)

// o200kASCII is a read-only table of the o200k classes of ASCII bytes.
var o200kASCII = func() (t [utf8.RuneSelf]uint8) {
	for b := 0; b < utf8.RuneSelf; b++ {
		t[b] = o200kClassOf(rune(b))
	}
	return t
}()

func o200kClassOf(r rune) uint8 {
	switch {
	case unicode.Is(unicode.Ll, r):
		return oLower | oLetter
	case unicode.Is(unicode.Lu, r), unicode.Is(unicode.Lt, r):
		return oUpper | oLetter
	case unicode.Is(unicode.Lm, r), unicode.Is(unicode.Lo, r):
		return oUpper | oLower | oLetter
	case unicode.Is(unicode.M, r):
		return oUpper | oLower
	case unicode.IsNumber(r):
		return oNum
	case r == '\r' || r == '\n':
		return oSpace | oCRLF
	case unicode.IsSpace(r):
		return oSpace
	}
	return 0
}

// o200kBMP is the read-only table of the o200k classes of the Basic
// Multilingual Plane, built on first use (64 KiB): the unicode.Is chain
// of o200kClassOf costs more than the rest of the split.
var o200kBMP = sync.OnceValue(func() *[0x10000]uint8 {
	var t [0x10000]uint8
	for r := range t {
		t[r] = o200kClassOf(rune(r))
	}
	return &t
})

// o200kAt decodes the rune at s[i] with its o200k classes and size.
func o200kAt(s string, i int) (rune, uint8, int) {
	b := s[i]
	if b < utf8.RuneSelf {
		return rune(b), o200kASCII[b], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r < 0x10000 {
		return r, o200kBMP()[r], n
	}
	return r, o200kClassOf(r), n
}

// o200kPrefix is [^\r\n\p{L}\p{N}].
func o200kPrefix(c uint8) bool { return c&(oLetter|oNum|oCRLF) == 0 }

// o200kPunct is [^\s\p{L}\p{N}].
func o200kPunct(c uint8) bool { return c&(oLetter|oNum|oSpace) == 0 }

// o200kRun returns the end of the run of runes with a class in cls from i.
func o200kRun(s string, i int, cls uint8) int {
	for i < len(s) {
		_, c, n := o200kAt(s, i)
		if c&cls == 0 {
			break
		}
		i += n
	}
	return i
}

// o200kContraction matches (?i:'s|'t|'re|'ve|'m|'ll|'d)? at i and returns
// the end (i when it does not match). Case folding is Unicode's simple
// folding, as in Rust's regex: besides ASCII, "s" also matches "ſ" (U+017F).
func o200kContraction(s string, i int) int {
	if i >= len(s) || s[i] != '\'' || i+1 >= len(s) {
		return i
	}
	if e := contraction(s, i+1, true); e > 0 {
		return e
	}
	if i+2 < len(s) && s[i+1] == 0xC5 && s[i+2] == 0xBF { // ſ
		return i + 3
	}
	return i
}

// o200kWordLower is [Upper]*[Lower]+ contraction? from p under
// backtracking: the greedy [Upper]* run is given back until [Lower]+ can
// start. It returns the end or -1.
func o200kWordLower(s string, p int) int {
	j, lastLowerEnd := p, -1
	for j < len(s) {
		_, c, n := o200kAt(s, j)
		if c&oUpper == 0 {
			break
		}
		if c&oLower != 0 {
			lastLowerEnd = j + n
		}
		j += n
	}
	if j < len(s) {
		if _, c, _ := o200kAt(s, j); c&oLower != 0 {
			return o200kContraction(s, o200kRun(s, j, oLower))
		}
	}
	// [Lower]+ starts at the last rune of the upper run that is also
	// lower; the runes after it are not lower, so it is one rune long.
	if lastLowerEnd >= 0 {
		return o200kContraction(s, lastLowerEnd)
	}
	return -1
}

// o200kWordUpper is [Upper]+[Lower]* contraction? from p, or -1.
func o200kWordUpper(s string, p int) int {
	j := o200kRun(s, p, oUpper)
	if j == p {
		return -1
	}
	return o200kContraction(s, o200kRun(s, j, oLower))
}

// matchO200k returns the end of the PatternO200k match that starts at i
// (i < len(s)), or -1, following the regex's leftmost-first alternation and
// backtracking.
func matchO200k(s string, i int) int {
	r, c, n := o200kAt(s, i)
	pre := o200kPrefix(c)
	// [^\r\n\p{L}\p{N}]?[Upper]*[Lower]+('s...)?
	if pre && i+n < len(s) {
		if e := o200kWordLower(s, i+n); e >= 0 {
			return e
		}
	}
	if c&(oUpper|oLower) != 0 {
		if e := o200kWordLower(s, i); e >= 0 {
			return e
		}
	}
	// [^\r\n\p{L}\p{N}]?[Upper]+[Lower]*('s...)?
	if pre && i+n < len(s) {
		if e := o200kWordUpper(s, i+n); e >= 0 {
			return e
		}
	}
	if c&oUpper != 0 {
		return o200kWordUpper(s, i)
	}
	// \p{N}{1,3}
	if c&oNum != 0 {
		e := i + n
		for k := 1; k < 3 && e < len(s); k++ {
			_, c2, n2 := o200kAt(s, e)
			if c2&oNum == 0 {
				break
			}
			e += n2
		}
		return e
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n/]*
	start := -1
	if r == ' ' && i+1 < len(s) {
		if _, c2, n2 := o200kAt(s, i+1); o200kPunct(c2) {
			start = i + 1 + n2
		}
	}
	if start < 0 && o200kPunct(c) {
		start = i + n
	}
	if start >= 0 {
		e := start
		for e < len(s) {
			_, c2, n2 := o200kAt(s, e)
			if !o200kPunct(c2) {
				break
			}
			e += n2
		}
		for e < len(s) && (s[e] == '\r' || s[e] == '\n' || s[e] == '/') {
			e++
		}
		return e
	}
	// \s*[\r\n]+|\s+(?!\S)|\s+
	return matchSpaces(s, i, true)
}
