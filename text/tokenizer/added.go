package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// addedToken is a token matched in raw text before the model runs.
type addedToken struct {
	id                         int32
	special                    bool // skipped with ParseSpecial=false
	lstrip, rstrip, singleWord bool
}

// addedMatcher finds added tokens in text, leftmost-longest, with a byte
// trie.
type addedMatcher struct {
	toks     []addedToken
	children map[uint64]int32 // node<<8 | byte → child node
	terminal []int32          // node → index in toks, or -1
	// first[parseSpecial][b] reports whether some allowed token starts with b.
	first [2][256]bool
	any   [2]bool
}

func newAddedMatcher() *addedMatcher {
	return &addedMatcher{children: make(map[uint64]int32), terminal: []int32{-1}}
}

func (a *addedMatcher) add(content string, t addedToken) {
	if content == "" {
		return
	}
	node := int32(0)
	for i := 0; i < len(content); i++ {
		k := uint64(node)<<8 | uint64(content[i])
		child, ok := a.children[k]
		if !ok {
			child = int32(len(a.terminal))
			a.terminal = append(a.terminal, -1)
			a.children[k] = child
		}
		node = child
	}
	if old := a.terminal[node]; old >= 0 {
		a.toks[old] = t
	} else {
		a.terminal[node] = int32(len(a.toks))
		a.toks = append(a.toks, t)
	}
	a.first[1][content[0]], a.any[1] = true, true
	if !t.special {
		a.first[0][content[0]], a.any[0] = true, true
	}
}

// segment is either raw text (id < 0) or a matched added token.
type segment struct {
	text string
	id   int32
}

// split cuts text into raw-text and added-token segments, appending them to
// dst. Special tokens are matched only when parseSpecial is set.
func (a *addedMatcher) split(text string, parseSpecial bool, dst []segment) []segment {
	ps := 0
	if parseSpecial {
		ps = 1
	}
	if !a.any[ps] {
		if text != "" {
			dst = append(dst, segment{text, -1})
		}
		return dst
	}
	first := &a.first[ps]
	segStart := 0
	for i := 0; i < len(text); {
		if !first[text[i]] {
			i++
			continue
		}
		end, ti := a.longest(text, i, parseSpecial)
		if ti < 0 {
			i++
			continue
		}
		t := a.toks[ti]
		if t.singleWord && (isWordBefore(text, i) || isWordAfter(text, end)) {
			i++
			continue
		}
		s, e := i, end
		if t.lstrip {
			for s > segStart {
				r, n := utf8.DecodeLastRuneInString(text[segStart:s])
				if !unicode.IsSpace(r) {
					break
				}
				s -= n
			}
		}
		if t.rstrip {
			for e < len(text) {
				r, n := utf8.DecodeRuneInString(text[e:])
				if !unicode.IsSpace(r) {
					break
				}
				e += n
			}
		}
		if s > segStart {
			dst = append(dst, segment{text[segStart:s], -1})
		}
		dst = append(dst, segment{id: t.id})
		segStart, i = e, e
	}
	if segStart < len(text) {
		dst = append(dst, segment{text[segStart:], -1})
	}
	return dst
}

// longest returns the end and token index of the longest allowed token
// starting at i, or -1.
func (a *addedMatcher) longest(text string, i int, parseSpecial bool) (int, int32) {
	node := int32(0)
	bestEnd, best := -1, int32(-1)
	for j := i; j < len(text); j++ {
		child, ok := a.children[uint64(node)<<8|uint64(text[j])]
		if !ok {
			break
		}
		node = child
		if ti := a.terminal[node]; ti >= 0 && (parseSpecial || !a.toks[ti].special) {
			bestEnd, best = j+1, ti
		}
	}
	return bestEnd, best
}

func isWordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) }

func isWordBefore(text string, i int) bool {
	if i == 0 {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(text[:i])
	return isWordRune(r)
}

func isWordAfter(text string, i int) bool {
	if i >= len(text) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(text[i:])
	return isWordRune(r)
}
