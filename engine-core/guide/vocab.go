package guide

import (
	"bytes"
	"fmt"
	"slices"
	"unicode/utf8"
)

// trieNode is one node of the flattened token trie, in preorder: the
// subtree of node i is nodes[i+1 : end].
type trieNode struct {
	tok   int32 // token ending here (first of its equal-bytes chain), or -1
	end   int32
	depth uint16
	b     byte
	dup   bool // tok has equal-bytes tokens (trie.same)
}

// trie is a flattened token trie; same chains tokens with equal bytes
// (same[id] is the next one, or -1).
type trie struct {
	nodes    []trieNode
	same     []int32
	maxDepth int
}

// buildTrie lays out the tokens ids (non-empty, non-special, sorted by
// sortByBytes) in preorder.
func buildTrie(tokens [][]byte, ids []int32) *trie {
	tr := &trie{same: make([]int32, len(tokens))}
	for i := range tr.same {
		tr.same[i] = -1
	}
	tr.nodes = append(tr.nodes, trieNode{tok: -1})
	path := []int32{0} // node index per depth
	var prev []byte
	for _, id := range ids {
		t := tokens[id]
		if prev != nil && bytes.Equal(t, prev) {
			tr.nodes[path[len(t)]].dup = true
			last := tr.nodes[path[len(t)]].tok
			for tr.same[last] >= 0 {
				last = tr.same[last]
			}
			tr.same[last] = id
			continue
		}
		lcp := 0
		for lcp < len(t) && lcp < len(prev) && t[lcp] == prev[lcp] {
			lcp++
		}
		for d := len(path) - 1; d > lcp; d-- {
			tr.nodes[path[d]].end = int32(len(tr.nodes))
		}
		path = path[:lcp+1]
		for d := lcp; d < len(t); d++ {
			path = append(path, int32(len(tr.nodes)))
			tr.nodes = append(tr.nodes, trieNode{tok: -1, depth: uint16(d + 1), b: t[d]})
		}
		tr.nodes[path[len(t)]].tok = id
		tr.maxDepth = max(tr.maxDepth, len(t))
		prev = t
	}
	for _, n := range path {
		tr.nodes[n].end = int32(len(tr.nodes))
	}
	return tr
}

// sortByBytes orders ids by their tokens' bytes (equal bytes by id).
func sortByBytes(tokens [][]byte, ids []int32) {
	slices.SortStableFunc(ids, func(a, b int32) int { return bytes.Compare(tokens[a], tokens[b]) })
}

// slice is a precomputed part of the vocabulary (llguidance's slicer):
// the tokens whose bytes match a regex that lexer states often subsume
// (runs of plain JSON string characters), plus a trie of all other
// tokens. When a terminal state provably keeps every slice string alive,
// its mask is the slice's set plus a walk of the (much smaller) rest.
type slice struct {
	pattern string
	d       *dfa
	set     tokenSet
	rest    *trie
}

// slicePatterns are tried in order; the first one a state subsumes wins.
var slicePatterns = []string{
	`[^"\\\x00-\x1F\x7F]+`,
	`[^"\\\x00-\x1F\x7F]{1,16}`,
}

// Vocab is a model vocabulary prepared for constrained decoding: each
// token's bytes, a token trie and the slices, built once per model. It is
// immutable and safe for concurrent use.
type Vocab struct {
	toks    [][]byte
	special []bool
	eos     []int32
	*trie
	slices []*slice
	// counts are the length-class slices, tried in order (plain JSON
	// string characters first).
	counts []*countSlice
}

// maxCountChars bounds the token lengths (in characters) a countSlice
// sorts into length classes; longer tokens are walked.
const maxCountChars = 32

// countPatterns are the character classes of the length-class slices:
// plain JSON-string characters (free and maxLength-bounded strings) and
// ASCII letters and digits (identifier-like runs: the parts of e-mail
// addresses and host names, `pattern` classes such as [A-Za-z0-9_-]{1,32}).
var countPatterns = []string{
	`[^"\\\x00-\x1F\x7F]+`,
	`[a-zA-Z0-9]+`,
}

// countSlice sorts the tokens made only of one class of characters (see
// countPatterns) by length. A lexeme state that keeps exactly the class
// strings of at most r characters alive (a JSON string with maxLength, or
// r unbounded) allows upTo[r] plus whatever a walk of rest (every other
// token) finds.
type countSlice struct {
	idx  int        // position in Vocab.counts (memo key)
	d    *dfa       // class characters, accepting at character boundaries
	upTo [][]uint64 // upTo[k]: class tokens of 1..k characters
	rest *trie
}

// NewVocab prepares a vocabulary from each token id's bytes (as decoded in
// the middle of a sequence), the end-of-sequence ids, and which ids are
// special (never produced by a grammar). Empty tokens are never allowed.
func NewVocab(tokens [][]byte, eos []int32, special func(id int32) bool) (*Vocab, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("guide: empty vocabulary")
	}
	v := &Vocab{toks: tokens, special: make([]bool, len(tokens))}
	for _, e := range eos {
		if e < 0 || int(e) >= len(tokens) {
			return nil, fmt.Errorf("guide: eos id %d out of range", e)
		}
		v.eos = append(v.eos, e)
	}
	if len(v.eos) == 0 {
		return nil, fmt.Errorf("guide: no eos token")
	}
	for i := range tokens {
		v.special[i] = special != nil && special(int32(i))
	}
	for _, e := range v.eos {
		v.special[e] = true
	}
	var ids []int32
	for i := range tokens {
		if !v.special[i] && len(tokens[i]) > 0 && len(tokens[i]) <= 0xFFFF {
			ids = append(ids, int32(i))
		}
	}
	// Sorted once: every trie below takes an ordered subsequence.
	sortByBytes(tokens, ids)
	v.trie = buildTrie(tokens, ids)
	for _, p := range slicePatterns {
		n, err := compileNFA(p)
		if err != nil {
			return nil, fmt.Errorf("guide: slice %s: %w", p, err)
		}
		sl := &slice{pattern: p, d: newDFA(n, 0)}
		words := make([]uint64, (len(tokens)+63)/64)
		var rest []int32
		for _, id := range ids {
			if sl.d.matchString(string(tokens[id])) {
				words[id>>6] |= 1 << (uint(id) & 63)
			} else {
				rest = append(rest, id)
			}
		}
		sl.set = newTokenSet(words)
		sl.rest = buildTrie(tokens, rest)
		v.slices = append(v.slices, sl)
	}
	for i, p := range countPatterns {
		n, err := compileNFA(p)
		if err != nil {
			return nil, fmt.Errorf("guide: count slice %s: %w", p, err)
		}
		v.counts = append(v.counts, newCountSlice(i, tokens, ids, newDFA(n, 0)))
	}
	return v, nil
}

func newCountSlice(idx int, tokens [][]byte, ids []int32, d *dfa) *countSlice {
	cs := &countSlice{idx: idx, d: d, upTo: make([][]uint64, maxCountChars+1)}
	nw := (len(tokens) + 63) / 64
	byLen := make([][]int32, maxCountChars+1)
	var rest []int32
	for _, id := range ids {
		t := tokens[id]
		n := utf8.RuneCount(t)
		if n <= maxCountChars && d.matchString(string(t)) {
			byLen[n] = append(byLen[n], id)
		} else {
			rest = append(rest, id)
		}
	}
	cur := make([]uint64, nw)
	for k := 0; k <= maxCountChars; k++ {
		for _, id := range byLen[k] {
			cur[id>>6] |= 1 << (uint(id) & 63)
		}
		cs.upTo[k] = append([]uint64(nil), cur...)
	}
	cs.rest = buildTrie(tokens, rest)
	return cs
}

// TokenSource is the part of text/tokenizer.Tokenizer a vocabulary
// is built from; every tokenizer.Tokenizer satisfies it. (Declared here so
// that this package does not depend on the tokenizer package.)
type TokenSource interface {
	TokenBytes(id int32) []byte
	IsSpecial(id int32) bool
	VocabSize() int
	EOS() int32
}

// FromTokenizer prepares the vocabulary of a tokenizer; extraEOS adds end
// ids besides t.EOS() (for example <|im_end|> for chat models).
func FromTokenizer(t TokenSource, extraEOS ...int32) (*Vocab, error) {
	toks := make([][]byte, t.VocabSize())
	for i := range toks {
		toks[i] = t.TokenBytes(int32(i))
	}
	eos := extraEOS
	if e := t.EOS(); e >= 0 {
		eos = append([]int32{e}, extraEOS...)
	}
	return NewVocab(toks, eos, t.IsSpecial)
}

// Size returns the number of token ids.
func (v *Vocab) Size() int { return len(v.toks) }

// EOS returns the end-of-sequence ids.
func (v *Vocab) EOS() []int32 { return v.eos }

// TokenBytes returns the bytes of token id.
func (v *Vocab) TokenBytes(id int32) []byte { return v.toks[id] }

// isEOS reports whether id ends the sequence.
func (v *Vocab) isEOS(id int32) bool {
	for _, e := range v.eos {
		if e == id {
			return true
		}
	}
	return false
}

// Nodes returns the number of trie nodes (for diagnostics).
func (v *Vocab) Nodes() int { return len(v.nodes) }
