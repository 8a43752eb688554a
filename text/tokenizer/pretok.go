package tokenizer

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// The pre-tokenizer regexes that Sluice matches with hand-written code. They
// are recognised by exact string comparison with the pattern a file gives.
const (
	// PatternGPT2 is GPT-2's split regex (also ByteLevel's use_regex).
	PatternGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	// PatternLlama3 is Llama-3's split regex.
	PatternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// PatternQwen2 is Qwen2/Qwen3's (and DeepSeek-R1-Qwen's) split regex.
	PatternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// character classes used by the hand-written matchers.
const (
	clsL    = 1 << iota // \p{L}
	clsN                // \p{N}
	clsS                // \s
	clsCRLF             // [\r\n]
)

// asciiClass is a read-only table of the classes of ASCII bytes.
var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for b := 0; b < utf8.RuneSelf; b++ {
		t[b] = classOf(rune(b))
	}
	return t
}()

func classOf(r rune) uint8 {
	var c uint8
	switch {
	case unicode.IsLetter(r):
		c = clsL
	case unicode.IsNumber(r):
		c = clsN
	case unicode.IsSpace(r):
		c = clsS
		if r == '\r' || r == '\n' {
			c |= clsCRLF
		}
	}
	return c
}

// runeAt decodes the rune at s[i] with its class and size.
func runeAt(s string, i int) (rune, uint8, int) {
	b := s[i]
	if b < utf8.RuneSelf {
		return rune(b), asciiClass[b], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return r, classOf(r), n
}

// isPunct is [^\s\p{L}\p{N}].
func isPunct(c uint8) bool { return c&(clsL|clsN|clsS) == 0 }

// runOf returns the end of the run of runes with class bit cls from i.
func runOf(s string, i int, cls uint8) int {
	for i < len(s) {
		_, c, n := runeAt(s, i)
		if c&cls == 0 {
			break
		}
		i += n
	}
	return i
}

// runOfPunct returns the end of the run of [^\s\p{L}\p{N}] from i.
func runOfPunct(s string, i int) int {
	for i < len(s) {
		_, c, n := runeAt(s, i)
		if !isPunct(c) {
			break
		}
		i += n
	}
	return i
}

// splitFamily selects one of the hand-written regex matchers.
type splitFamily uint8

const (
	familyGPT2 splitFamily = iota
	familyLlama3
	familyQwen2
	familyO200k // PatternO200k, matched by matchO200k
)

// contraction matches 's|'t|'re|'ve|'m|'ll|'d after the apostrophe at i-1,
// case-insensitively (ASCII) when fold is set. It returns the end or -1.
func contraction(s string, i int, fold bool) int {
	if i >= len(s) {
		return -1
	}
	lower := func(b byte) byte {
		if fold && 'A' <= b && b <= 'Z' {
			return b + 'a' - 'A'
		}
		return b
	}
	switch lower(s[i]) {
	case 's', 't', 'm', 'd':
		return i + 1
	case 'r', 'v':
		if i+1 < len(s) && lower(s[i+1]) == 'e' {
			return i + 2
		}
	case 'l':
		if i+1 < len(s) && lower(s[i+1]) == 'l' {
			return i + 2
		}
	}
	return -1
}

// matchAt returns the end of the regex match that starts at i (i < len(s)),
// or -1 when no alternative matches there. It follows the leftmost-first
// alternation and backtracking semantics of the corresponding regex.
func (f splitFamily) matchAt(s string, i int) int {
	if f == familyO200k {
		return matchO200k(s, i)
	}
	r, c, n := runeAt(s, i)
	if r == '\'' {
		if e := contraction(s, i+1, f != familyGPT2); e > 0 {
			return e
		}
	}
	if f == familyGPT2 {
		if r == ' ' && i+1 < len(s) {
			_, c2, n2 := runeAt(s, i+1)
			switch {
			case c2&clsL != 0:
				return runOf(s, i+1+n2, clsL)
			case c2&clsN != 0:
				return runOf(s, i+1+n2, clsN)
			case isPunct(c2):
				return runOfPunct(s, i+1+n2)
			}
		}
		switch {
		case c&clsL != 0:
			return runOf(s, i+n, clsL)
		case c&clsN != 0:
			return runOf(s, i+n, clsN)
		case isPunct(c):
			return runOfPunct(s, i+n)
		}
		return matchSpaces(s, i, false)
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c&clsL != 0 {
		return runOf(s, i+n, clsL)
	}
	if c&(clsN|clsCRLF) == 0 && i+n < len(s) {
		if _, c2, n2 := runeAt(s, i+n); c2&clsL != 0 {
			return runOf(s, i+n+n2, clsL)
		}
	}
	// \p{N}{1,3} or \p{N}
	if c&clsN != 0 {
		e := i + n
		limit := 3
		if f == familyQwen2 {
			limit = 1
		}
		for k := 1; k < limit && e < len(s); k++ {
			_, c2, n2 := runeAt(s, e)
			if c2&clsN == 0 {
				break
			}
			e += n2
		}
		return e
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	start := -1
	if isPunct(c) {
		start = i + n
	} else if r == ' ' && i+1 < len(s) {
		if _, c2, n2 := runeAt(s, i+1); isPunct(c2) {
			start = i + 1 + n2
		}
	}
	if start >= 0 {
		e := runOfPunct(s, start)
		for e < len(s) && (s[e] == '\r' || s[e] == '\n') {
			e++
		}
		return e
	}
	return matchSpaces(s, i, true)
}

// matchSpaces implements the whitespace alternatives: (\s*[\r\n]+ when nl
// is set) | \s+(?!\S) | \s+.
func matchSpaces(s string, i int, nl bool) int {
	j := i
	lastStart := -1 // start of the last rune of the run
	nlEnd := -1     // end of the last [\r\n] in the run
	for j < len(s) {
		_, c, n := runeAt(s, j)
		if c&clsS == 0 {
			break
		}
		if c&clsCRLF != 0 {
			nlEnd = j + n
		}
		lastStart = j
		j += n
	}
	if j == i {
		return -1
	}
	if nl && nlEnd > 0 {
		return nlEnd
	}
	if j == len(s) || lastStart == i {
		return j // \s+(?!\S) at the end, or the \s+ fallback for one char
	}
	return lastStart
}

// splitter finds the matches of one Split pattern.
type splitter interface {
	// matches appends the [start, end) byte ranges of the pattern's
	// non-overlapping matches in s to dst.
	matches(s string, dst [][2]int) [][2]int
}

type familySplitter struct{ f splitFamily }

func (fs familySplitter) matches(s string, dst [][2]int) [][2]int {
	for i := 0; i < len(s); {
		e := fs.f.matchAt(s, i)
		if e < 0 {
			_, _, n := runeAt(s, i)
			i += n
			continue
		}
		dst = append(dst, [2]int{i, e})
		i = e
	}
	return dst
}

type literalSplitter struct{ lit string }

func (l literalSplitter) matches(s string, dst [][2]int) [][2]int {
	if l.lit == "" {
		return dst
	}
	for off := 0; ; {
		k := strings.Index(s[off:], l.lit)
		if k < 0 {
			return dst
		}
		dst = append(dst, [2]int{off + k, off + k + len(l.lit)})
		off += k + len(l.lit)
	}
}

// regexSplitter is the general fallback for patterns with no hand-written
// matcher. regexp2 supports the lookarounds that Go's regexp lacks; it is
// slower (about 1 MB/s) but exact.
type regexSplitter struct{ re *regexp2.Regexp }

func (rs regexSplitter) matches(s string, dst [][2]int) [][2]int {
	if s == "" {
		return dst
	}
	idx, err := rs.re.FindAllStringIndex(s, -1)
	if err != nil {
		return dst // a match timeout leaves the rest as one piece
	}
	for _, m := range idx {
		if m[1] > m[0] {
			dst = append(dst, [2]int{m[0], m[1]})
		}
	}
	return dst
}

// newSplitter returns the matcher for a Split pattern.
func newSplitter(regex, literal string) (splitter, error) {
	if regex == "" {
		return literalSplitter{literal}, nil
	}
	switch regex {
	case PatternGPT2, `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`:
		return familySplitter{familyGPT2}, nil
	case PatternLlama3:
		return familySplitter{familyLlama3}, nil
	case PatternQwen2:
		return familySplitter{familyQwen2}, nil
	case PatternO200k:
		return familySplitter{familyO200k}, nil
	}
	re, err := regexp2.Compile(regex, regexp2.Unicode)
	if err != nil {
		return nil, fmt.Errorf("compile split regex %q: %w", regex, err)
	}
	return regexSplitter{re}, nil
}

// splitBehavior is the Split pre-tokenizer's "behavior".
type splitBehavior uint8

const (
	behaviorIsolated splitBehavior = iota
	behaviorRemoved
	behaviorMergedWithPrevious
	behaviorMergedWithNext
	behaviorContiguous
)

func parseBehavior(s string) (splitBehavior, error) {
	switch s {
	case "Isolated", "":
		return behaviorIsolated, nil
	case "Removed":
		return behaviorRemoved, nil
	case "MergedWithPrevious":
		return behaviorMergedWithPrevious, nil
	case "MergedWithNext":
		return behaviorMergedWithNext, nil
	case "Contiguous":
		return behaviorContiguous, nil
	}
	return 0, fmt.Errorf("unknown split behavior %q", s)
}

// applyBehavior turns the matches of s into pieces per behavior (and
// invert), appending the pieces to out. It follows the Hugging Face
// tokenizers semantics, where only non-empty segments take part.
func applyBehavior(s string, ms [][2]int, b splitBehavior, invert bool, out []string) []string {
	if b == behaviorIsolated {
		prev := 0
		for _, m := range ms {
			if m[0] > prev {
				out = append(out, s[prev:m[0]])
			}
			if m[1] > m[0] {
				out = append(out, s[m[0]:m[1]])
			}
			prev = m[1]
		}
		if prev < len(s) {
			out = append(out, s[prev:])
		}
		return out
	}
	type seg struct {
		s, e  int
		match bool
	}
	segs := make([]seg, 0, 2*len(ms)+1)
	prev := 0
	for _, m := range ms {
		if m[0] > prev {
			segs = append(segs, seg{prev, m[0], invert})
		}
		if m[1] > m[0] {
			segs = append(segs, seg{m[0], m[1], !invert})
		}
		prev = m[1]
	}
	if prev < len(s) {
		segs = append(segs, seg{prev, len(s), invert})
	}
	switch b {
	case behaviorRemoved:
		for _, g := range segs {
			if !g.match {
				out = append(out, s[g.s:g.e])
			}
		}
	case behaviorMergedWithPrevious:
		var acc []seg
		prevMatch := false
		for _, g := range segs {
			if g.match && !prevMatch && len(acc) > 0 {
				acc[len(acc)-1].e = g.e
			} else {
				acc = append(acc, g)
			}
			prevMatch = g.match
		}
		for _, g := range acc {
			out = append(out, s[g.s:g.e])
		}
	case behaviorMergedWithNext:
		var acc []seg // built in reverse
		prevMatch := false
		for k := len(segs) - 1; k >= 0; k-- {
			g := segs[k]
			if g.match && !prevMatch && len(acc) > 0 {
				acc[len(acc)-1].s = g.s
			} else {
				acc = append(acc, g)
			}
			prevMatch = g.match
		}
		for k := len(acc) - 1; k >= 0; k-- {
			out = append(out, s[acc[k].s:acc[k].e])
		}
	case behaviorContiguous:
		var acc []seg
		prevMatch := false
		for _, g := range segs {
			if g.match && prevMatch && len(acc) > 0 {
				acc[len(acc)-1].e = g.e
			} else {
				acc = append(acc, g)
			}
			prevMatch = g.match
		}
		for _, g := range acc {
			out = append(out, s[g.s:g.e])
		}
	}
	return out
}
