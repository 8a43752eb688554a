package guide

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluice-llm/sluice/constraint"
)

// reasoningGap is the whitespace allowed between the reasoning end marker
// and a constrained answer.
const reasoningGap = `[ \t\r\n]{0,20}`

// symEnd marks the end of an alternative in Grammar.syms.
const symEnd int32 = -1

// ruleOf decodes a rule reference in Grammar.syms.
func ruleOf(v int32) int32 { return -v - 2 }

// Grammar is a constraint compiled against one vocabulary: the grammar IR
// flattened into positions, a lazy automaton per terminal, and a cache of
// masks by matcher state. It is immutable apart from its caches and safe
// for concurrent use by many Matchers.
type Grammar struct {
	vocab *Vocab
	// syms holds every alternative, each followed by symEnd: a value >= 0
	// is a terminal, symEnd ends the alternative, <= -2 calls rule -v-2.
	syms  []int32
	rules [][]int32 // alternative start positions per rule
	terms []*terminal
	stub  int32 // position of [start rule, END]
	// stubWS is [whitespace, start rule, END]: after reasoning, models put
	// blank lines before the answer whatever its format.
	stubWS int32
	hash   string
	// bytes is the estimated size of the compiled grammar
	// (constraint.EstimateBytes), for the compiler's cache bound.
	bytes int64
	masks *maskCache
	memo  *memo
	// reasoningEnd is the marker after which an AfterReasoning matcher
	// starts constraining.
	reasoningEnd []byte
}

// terminal is one regex terminal's automaton plus, per automaton state,
// the set of tokens that stay inside it. Shared by every grammar of a
// Compiler that uses the same pattern.
type terminal struct {
	pattern string
	d       *dfa
	mu      sync.Mutex
	inner   map[int32]*innerMask
	// budget is the compiler-wide byte budget for inner masks (nil: no
	// limit); past it new masks are computed but not kept.
	budget *atomic.Int64
	steps  map[stepKey]*charStep // charStep memo, under mu
	reps   [][]byte              // jointReps per count slice, under mu
}

// innerMask is, for one terminal state q, the tokens whose bytes all keep
// the terminal alive from q, and the trie nodes below which a token may end
// the terminal mid-token (the automaton accepts there and the node has
// children): those subtrees need the parser.
type innerMask struct {
	set    tokenSet
	bounds []int32
	tr     *trie // the trie bounds index into
}

func newTerminal(pattern string, maxStates int) (*terminal, error) {
	n, err := compileNFA(pattern)
	if err != nil {
		return nil, err
	}
	return &terminal{pattern: pattern, d: newDFA(n, maxStates), inner: map[int32]*innerMask{}}, nil
}

func (im *innerMask) bytes() int64 { return int64(im.set.bytes() + 4*len(im.bounds) + 32) }

// innerFor returns the inner mask of state q, computing it on first use
// by walking the token trie with the terminal automaton alone.
func (t *terminal) innerFor(q int32, v *Vocab) *innerMask {
	t.mu.Lock()
	im := t.inner[q]
	t.mu.Unlock()
	if im != nil {
		return im
	}
	im = t.computeInner(q, v)
	if t.budget != nil && t.budget.Add(-im.bytes()) < 0 {
		t.budget.Add(im.bytes())
		return im // over budget: used once, not kept
	}
	t.mu.Lock()
	if old := t.inner[q]; old != nil {
		im = old
		if t.budget != nil {
			t.budget.Add(im.bytes())
		}
	} else {
		t.inner[q] = im
	}
	t.mu.Unlock()
	return im
}

func (t *terminal) computeInner(q int32, v *Vocab) *innerMask {
	for _, cs := range v.counts {
		if r, ok := countState(cs, t, q); ok {
			im := t.walkInner(q, v, cs.rest)
			for i, w := range cs.upTo[r] {
				im.words[i] |= w
			}
			return im.finish()
		}
	}
	for _, sl := range v.slices {
		if subsumes(sl, t, q) {
			im := t.walkInner(q, v, sl.rest)
			sl.set.orInto(im.words)
			return im.finish()
		}
	}
	return t.walkInner(q, v, v.trie).finish()
}

// innerWalk is an inner mask under construction.
type innerWalk struct {
	words []uint64
	im    *innerMask
}

func (w innerWalk) finish() *innerMask {
	w.im.set = newTokenSet(w.words)
	return w.im
}

// walkInner walks trie tr with the terminal automaton alone from q.
func (t *terminal) walkInner(q int32, v *Vocab, tr *trie) innerWalk {
	d := t.d
	states := make([]int32, tr.maxDepth+1)
	states[0] = q
	words := make([]uint64, (len(v.toks)+63)/64)
	var bounds []int32
	nodes := tr.nodes
	for i := int32(1); i < int32(len(nodes)); {
		nd := &nodes[i]
		s := d.next(states[nd.depth-1], nd.b)
		if s == deadState {
			i = nd.end
			continue
		}
		states[nd.depth] = s
		// Branch-free "if tok >= 0, set its bit": about half the live
		// nodes end a token, an unpredictable branch.
		id := nd.tok
		keep := uint64(int64(^id) >> 63) // all ones when id >= 0
		id &= int32(keep)
		words[id>>6] |= 1 << (uint(id) & 63) & keep
		if nd.dup {
			for id = tr.same[nd.tok]; id >= 0; id = tr.same[id] {
				words[id>>6] |= 1 << (uint(id) & 63)
			}
		}
		if accepting(s) && nd.end > i+1 {
			bounds = append(bounds, i)
		}
		i++
	}
	return innerWalk{words: words, im: &innerMask{bounds: bounds, tr: tr}}
}

// charStep is what one more character of a count slice's class (see
// countPatterns) does to a terminal state:
// fail (it may accept, or only some characters kill it), kill it on every
// character (dead), or keep it alive in the states after.
type charStep struct {
	fail, dead bool
	after      []int32
}

// countState reports whether, on strings of cs's class of characters,
// state q lives exactly up to r characters (r ≤ maxCountChars, where r =
// maxCountChars also means "or more") and never accepts: then the class
// tokens of at most r characters are allowed and longer ones are not. It
// advances the set of states one character at a time, with the effect of
// one character memoised per state, so the successive count states of a
// length-bounded string cost little each.
func countState(cs *countSlice, t *terminal, q int32) (int, bool) {
	level := []int32{q}
	var next []int32
	for c := 0; c < maxCountChars; c++ {
		next = next[:0]
		dead, alive := false, false
		for _, s := range level {
			st := t.charStep(cs, s)
			switch {
			case st.fail:
				return 0, false
			case st.dead:
				dead = true
			default:
				alive = true
				for _, a := range st.after {
					if !slices.Contains(next, a) {
						next = append(next, a)
					}
				}
			}
			if dead && alive {
				return 0, false
			}
		}
		if !alive {
			return c, true
		}
		if len(next) > 64 {
			return 0, false
		}
		level, next = next, level
	}
	return maxCountChars, true
}

// stepKey names a charStep: a count slice and a terminal state.
type stepKey struct {
	cs int
	q  int32
}

// charStep returns (memoised) the effect of one class character on q.
func (t *terminal) charStep(cs *countSlice, q int32) *charStep {
	k := stepKey{cs.idx, q}
	t.mu.Lock()
	st := t.steps[k]
	t.mu.Unlock()
	if st != nil {
		return st
	}
	st = t.computeCharStep(cs, q)
	t.mu.Lock()
	if t.steps == nil {
		t.steps = map[stepKey]*charStep{}
	}
	t.steps[k] = st
	t.mu.Unlock()
	return st
}

func (t *terminal) computeCharStep(cs *countSlice, q int32) *charStep {
	reps := t.jointReps(cs)
	type pair struct{ s, t int32 }
	st := &charStep{}
	dead, alive := false, false
	stack := []pair{{cs.d.start, q}}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, b := range reps {
			s2 := cs.d.next(p.s, b)
			if s2 == deadState {
				continue
			}
			t2 := t.d.next(p.t, b)
			if t2 == deadState {
				dead = true
				continue
			}
			if accepting(t2) {
				return &charStep{fail: true}
			}
			alive = true
			if accepting(s2) {
				if !slices.Contains(st.after, t2) {
					st.after = append(st.after, t2)
				}
			} else {
				stack = append(stack, pair{s2, t2})
			}
			if len(stack) > 1<<12 || len(st.after) > 64 {
				return &charStep{fail: true}
			}
		}
	}
	switch {
	case dead && alive:
		return &charStep{fail: true}
	case !alive:
		return &charStep{dead: true}
	}
	return st
}

// jointReps returns one byte per pair of byte classes of the count
// slice's automaton and the terminal's (memoised per count slice).
func (t *terminal) jointReps(cs *countSlice) []byte {
	t.mu.Lock()
	var reps []byte
	if cs.idx < len(t.reps) {
		reps = t.reps[cs.idx]
	}
	t.mu.Unlock()
	if reps != nil {
		return reps
	}
	d := cs.d
	var seen [256][256]bool
	for b := 0; b < 256; b++ {
		c1, c2 := d.class[b], t.d.class[b]
		if !seen[c1][c2] {
			seen[c1][c2] = true
			reps = append(reps, byte(b))
		}
	}
	t.mu.Lock()
	for len(t.reps) <= cs.idx {
		t.reps = append(t.reps, nil)
	}
	t.reps[cs.idx] = reps
	t.mu.Unlock()
	return reps
}

// subsumes reports whether every string of the slice keeps terminal
// state q alive and never accepting (so no slice token can end the
// terminal): a search of the product of the two automata.
func subsumes(sl *slice, t *terminal, q int32) bool {
	// Bytes that the two automata may tell apart: one per class pair.
	var reps []byte
	var seenClass [256][256]bool
	for b := 0; b < 256; b++ {
		cs, ct := sl.d.class[b], t.d.class[b]
		if !seenClass[cs][ct] {
			seenClass[cs][ct] = true
			reps = append(reps, byte(b))
		}
	}
	type pair struct{ s, t int32 }
	start := pair{sl.d.start, q}
	seen := map[pair]bool{start: true}
	stack := []pair{start}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, b := range reps {
			s2 := sl.d.next(p.s, b)
			if s2 == deadState {
				continue
			}
			t2 := t.d.next(p.t, b)
			if t2 == deadState || accepting(t2) {
				return false
			}
			np := pair{s2, t2}
			if !seen[np] {
				if len(seen) >= 1<<14 {
					return false
				}
				seen[np] = true
				stack = append(stack, np)
			}
		}
	}
	return true
}

// build flattens the IR against a vocabulary.
func build(ir *constraint.Grammar, v *Vocab, term func(string) (*terminal, error)) (*Grammar, error) {
	g := &Grammar{vocab: v}
	for _, p := range ir.Terminals {
		t, err := term(p)
		if err != nil {
			return nil, err
		}
		g.terms = append(g.terms, t)
	}
	g.rules = make([][]int32, len(ir.Rules))
	for i, r := range ir.Rules {
		for _, alt := range r.Alts {
			g.rules[i] = append(g.rules[i], int32(len(g.syms)))
			for _, s := range alt {
				if s.IsTerminal() {
					g.syms = append(g.syms, int32(s.Index()))
				} else {
					g.syms = append(g.syms, -int32(s.Index())-2)
				}
			}
			g.syms = append(g.syms, symEnd)
		}
	}
	if ir.Start < 0 || ir.Start >= len(ir.Rules) {
		return nil, fmt.Errorf("guide: start rule out of range")
	}
	g.stub = int32(len(g.syms))
	g.syms = append(g.syms, -int32(ir.Start)-2, symEnd)
	ws, err := term(reasoningGap)
	if err != nil {
		return nil, err
	}
	g.terms = append(g.terms, ws)
	g.stubWS = int32(len(g.syms))
	g.syms = append(g.syms, int32(len(g.terms)-1), -int32(ir.Start)-2, symEnd)
	return g, nil
}

// Hash returns the constraint hash the grammar was compiled from.
func (g *Grammar) Hash() string { return g.hash }

// CacheStats returns the mask cache's hits and misses so far.
func (g *Grammar) CacheStats() (hits, misses int64) {
	return g.masks.hits.Load(), g.masks.misses.Load()
}

// maskCache maps a matcher state key to its finished mask, bounded in
// bytes; when full, random entries are evicted.
type maskCache struct {
	mu     sync.Mutex
	m      map[string]*cachedMask
	bytes  int
	limit  int
	hits   atomic.Int64
	misses atomic.Int64
}

type cachedMask struct {
	words  []uint64
	ids    []int32
	sparse bool
	count  int
}

func (e *cachedMask) size() int { return 8*len(e.words) + 4*len(e.ids) + 64 }

func newMaskCache(limit int) *maskCache {
	return &maskCache{m: map[string]*cachedMask{}, limit: limit}
}

// get returns the cached mask of key, or nil.
func (c *maskCache) get(key []byte) *cachedMask {
	c.mu.Lock()
	e := c.m[string(key)]
	c.mu.Unlock()
	if e == nil {
		c.misses.Add(1)
		return nil
	}
	c.hits.Add(1)
	return e
}

// load fills dst from a cached mask.
func (dst *Bitmask) load(e *cachedMask) {
	if e.sparse && e.words == nil {
		clear(dst.words)
		for _, id := range e.ids {
			dst.set(id)
		}
		dst.ids = append(dst.ids[:0], e.ids...)
		dst.sparse, dst.count = true, len(e.ids)
		return
	}
	copy(dst.words, e.words)
	dst.ids = append(dst.ids[:0], e.ids...)
	dst.sparse, dst.count = e.sparse, e.count
}

// put caches m (finished) under key and returns the cache's entry for
// key (a new immutable copy of m when there was none).
func (c *maskCache) put(key []byte, m *Bitmask) *cachedMask {
	e := &cachedMask{sparse: m.sparse, count: m.count}
	if m.sparse {
		e.ids = append([]int32(nil), m.ids...)
	}
	// Setting many bits one by one costs more than copying the words.
	if !m.sparse || len(m.ids) > len(m.words)/8 {
		e.words = append([]uint64(nil), m.words...)
	}
	if e.size() > c.limit {
		return e
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[string(key)]; ok {
		return old
	}
	for c.bytes+e.size() > c.limit && len(c.m) > 0 {
		// Map iteration order is random: evict an arbitrary entry.
		skip := rand.IntN(len(c.m))
		for k, old := range c.m {
			if skip == 0 {
				c.bytes -= old.size()
				delete(c.m, k)
				break
			}
			skip--
		}
	}
	c.m[string(key)] = e
	c.bytes += e.size()
	return e
}
