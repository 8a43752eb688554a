package guide

import (
	"encoding/binary"
	"errors"
	"fmt"
	"regexp/syntax"
	"slices"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/sluice-llm/sluice/constraint"
)

// byteRange is an inclusive range of byte values.
type byteRange struct{ lo, hi byte }

// utf8Sequences calls emit with the byte-range sequences whose
// concatenations are exactly the UTF-8 encodings of the runes in [lo, hi]
// (surrogates excluded): one per sub-range of constraint.UTF8Split.
func utf8Sequences(lo, hi rune, emit func([]byteRange)) {
	constraint.UTF8Split(lo, hi, func(lo, hi rune) {
		a, b := utf8.AppendRune(nil, lo), utf8.AppendRune(nil, hi)
		seq := make([]byteRange, len(a))
		for i := range a {
			seq[i] = byteRange{a[i], b[i]}
		}
		emit(seq)
	})
}

// NFA state kinds.
const (
	nByte  uint8 = iota // consume a byte in [lo, hi], go to out
	nSplit              // epsilon to out and out1
	nMatch              // accept
	nFail               // no way on
)

type nfaState struct {
	kind   uint8
	lo, hi byte
	out    int32
	out1   int32
}

// nfa is a byte-level Thompson automaton.
type nfa struct {
	states []nfaState
	start  int32
}

// maxNFAStates bounds the automaton of one terminal.
const maxNFAStates = 200_000

var errNFATooLarge = errors.New("regex automaton too large")

func (n *nfa) add(s nfaState) (int32, error) {
	if len(n.states) >= maxNFAStates {
		return 0, errNFATooLarge
	}
	n.states = append(n.states, s)
	return int32(len(n.states) - 1), nil
}

// short cuts a pattern for an error message: terminals can be long
// (a lowered \p{L} is 1.8 KB), and errors reach clients.
func short(pattern string) string {
	const n = 64
	if len(pattern) <= n {
		return pattern
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(pattern[cut]) {
		cut--
	}
	return pattern[:cut] + "…"
}

// compileNFA builds the byte NFA of a terminal pattern.
func compileNFA(pattern string) (*nfa, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("parse /%s/: %w", short(pattern), err)
	}
	re = re.Simplify()
	n := &nfa{}
	match, _ := n.add(nfaState{kind: nMatch})
	start, err := n.build(re, match)
	if err != nil {
		return nil, fmt.Errorf("compile /%s/: %w", short(pattern), err)
	}
	n.start = start
	return n, nil
}

// build returns a state that matches re and then continues at next.
func (n *nfa) build(re *syntax.Regexp, next int32) (int32, error) {
	switch re.Op {
	case syntax.OpNoMatch:
		return n.add(nfaState{kind: nFail})
	case syntax.OpEmptyMatch:
		return next, nil
	case syntax.OpLiteral:
		var err error
		for i := len(re.Rune) - 1; i >= 0; i-- {
			r := re.Rune[i]
			if re.Flags&syntax.FoldCase != 0 {
				ranges := []rune{r, r}
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					ranges = append(ranges, f, f)
				}
				if next, err = n.class(ranges, next); err != nil {
					return 0, err
				}
				continue
			}
			b := utf8.AppendRune(nil, r)
			for j := len(b) - 1; j >= 0; j-- {
				if next, err = n.add(nfaState{kind: nByte, lo: b[j], hi: b[j], out: next}); err != nil {
					return 0, err
				}
			}
		}
		return next, nil
	case syntax.OpCharClass:
		return n.class(re.Rune, next)
	case syntax.OpAnyChar:
		return n.class([]rune{0, utf8.MaxRune}, next)
	case syntax.OpAnyCharNotNL:
		return n.class([]rune{0, '\n' - 1, '\n' + 1, utf8.MaxRune}, next)
	case syntax.OpCapture:
		return n.build(re.Sub[0], next)
	case syntax.OpConcat:
		var err error
		for i := len(re.Sub) - 1; i >= 0; i-- {
			if next, err = n.build(re.Sub[i], next); err != nil {
				return 0, err
			}
		}
		return next, nil
	case syntax.OpAlternate:
		var starts []int32
		for _, s := range re.Sub {
			st, err := n.build(s, next)
			if err != nil {
				return 0, err
			}
			starts = append(starts, st)
		}
		return n.splitAll(starts)
	case syntax.OpStar, syntax.OpPlus:
		sp, err := n.add(nfaState{kind: nSplit, out1: next})
		if err != nil {
			return 0, err
		}
		body, err := n.build(re.Sub[0], sp)
		if err != nil {
			return 0, err
		}
		n.states[sp].out = body
		if re.Op == syntax.OpPlus {
			return body, nil
		}
		return sp, nil
	case syntax.OpQuest:
		body, err := n.build(re.Sub[0], next)
		if err != nil {
			return 0, err
		}
		return n.add(nfaState{kind: nSplit, out: body, out1: next})
	case syntax.OpRepeat:
		// Simplify removes repeats except x{0}; expand defensively.
		if re.Max == 0 {
			return next, nil
		}
		return 0, fmt.Errorf("unexpanded repeat %s", re)
	}
	return 0, fmt.Errorf("unsupported %s", re)
}

func (n *nfa) splitAll(starts []int32) (int32, error) {
	if len(starts) == 0 {
		return n.add(nfaState{kind: nFail})
	}
	cur := starts[len(starts)-1]
	var err error
	for i := len(starts) - 2; i >= 0; i-- {
		if cur, err = n.add(nfaState{kind: nSplit, out: starts[i], out1: cur}); err != nil {
			return 0, err
		}
	}
	return cur, nil
}

// class builds the alternation of the UTF-8 sequences of rune ranges.
func (n *nfa) class(ranges []rune, next int32) (int32, error) {
	var starts []int32
	var err error
	for i := 0; i+1 < len(ranges); i += 2 {
		utf8Sequences(ranges[i], ranges[i+1], func(seq []byteRange) {
			if err != nil {
				return
			}
			s := next
			for j := len(seq) - 1; j >= 0 && err == nil; j-- {
				s, err = n.add(nfaState{kind: nByte, lo: seq[j].lo, hi: seq[j].hi, out: s})
			}
			starts = append(starts, s)
		})
	}
	if err != nil {
		return 0, err
	}
	return n.splitAll(starts)
}

// State ids of a dfa: idx<<2 | live<<1 | accepting, where live means some
// byte can follow. Index 0 is the dead state (empty set), so its id is 0.
const deadState int32 = 0

func accepting(q int32) bool { return q&1 != 0 }

// live reports whether some byte may follow in state q.
func live(q int32) bool { return q&2 != 0 }

const (
	chunkShift = 6
	chunkSize  = 1 << chunkShift
	// defaultMaxDFAStates caps a terminal's lazily built automaton.
	defaultMaxDFAStates = 1 << 15
)

type transChunk struct {
	t []atomic.Int32 // chunkSize*nclass; 0 = not computed, else id+1
}

// dfa is a lazily determinized byte automaton. next is safe for concurrent
// use: transitions are read with atomic loads and computed under mu.
type dfa struct {
	nfa     *nfa
	coreach []bool // NFA states from which a match is reachable
	class   [256]uint8
	rep     []byte // a representative byte per class
	nclass  int
	start   int32
	max     int

	chunks   []atomic.Pointer[transChunk]
	mu       sync.Mutex
	sets     [][]int32
	index    map[string]int32
	overflow atomic.Bool
	// scratch, under mu
	stack []int32
	seeds []int32
	set   []int32
	// single memoises, per NFA state, the id+1 of its closure's state.
	single []int32
	key    []byte
	mark   []uint32
	gen    uint32
}

func newDFA(n *nfa, maxStates int) *dfa {
	if maxStates <= 0 {
		maxStates = defaultMaxDFAStates
	}
	d := &dfa{nfa: n, max: maxStates, index: map[string]int32{}}
	// Co-reachability: states from which nMatch is reachable, by a
	// breadth-first search over reversed edges (linear time).
	d.coreach = make([]bool, len(n.states))
	rev := make([][]int32, len(n.states))
	var queue []int32
	for i, s := range n.states {
		switch s.kind {
		case nMatch:
			d.coreach[i] = true
			queue = append(queue, int32(i))
		case nByte:
			rev[s.out] = append(rev[s.out], int32(i))
		case nSplit:
			rev[s.out] = append(rev[s.out], int32(i))
			rev[s.out1] = append(rev[s.out1], int32(i))
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, p := range rev[s] {
			if !d.coreach[p] {
				d.coreach[p] = true
				queue = append(queue, p)
			}
		}
	}
	// Byte classes from range boundaries.
	var cut [257]bool
	for _, s := range n.states {
		if s.kind == nByte {
			cut[s.lo] = true
			cut[int(s.hi)+1] = true
		}
	}
	c := -1
	for b := 0; b < 256; b++ {
		if b == 0 || cut[b] {
			c++
			d.rep = append(d.rep, byte(b))
		}
		d.class[b] = uint8(c)
	}
	d.nclass = c + 1
	d.chunks = make([]atomic.Pointer[transChunk], (maxStates+chunkSize-1)/chunkSize)
	d.mark = make([]uint32, len(n.states))
	d.single = make([]int32, len(n.states))
	d.mu.Lock()
	d.intern(nil) // dead state, index 0
	d.start = d.intern(d.closure([]int32{n.start}))
	d.mu.Unlock()
	return d
}

// closure computes into d.set the sorted set of byte and match states
// reachable by epsilon moves from seeds, skipping states that cannot reach
// a match (mu held; d.set is scratch, copied by intern when kept).
func (d *dfa) closure(seeds []int32) []int32 {
	d.gen++
	if d.gen == 0 {
		clear(d.mark)
		d.gen = 1
	}
	set := d.set[:0]
	d.stack = append(d.stack[:0], seeds...)
	for len(d.stack) > 0 {
		s := d.stack[len(d.stack)-1]
		d.stack = d.stack[:len(d.stack)-1]
		if d.mark[s] == d.gen || !d.coreach[s] {
			continue
		}
		d.mark[s] = d.gen
		st := &d.nfa.states[s]
		switch st.kind {
		case nByte, nMatch:
			set = append(set, s)
		case nSplit:
			d.stack = append(d.stack, st.out1, st.out)
		}
	}
	slices.Sort(set)
	d.set = set
	return set
}

// intern returns the id of a state set, adding it (mu held; set may be
// scratch: it is copied when new). It returns the dead state when the
// automaton is full.
func (d *dfa) intern(set []int32) int32 {
	key := d.key[:0]
	flags := int32(0)
	for _, s := range set {
		key = binary.LittleEndian.AppendUint32(key, uint32(s))
		if d.nfa.states[s].kind == nMatch {
			flags |= 1
		} else {
			flags |= 2
		}
	}
	d.key = key
	if idx, ok := d.index[string(key)]; ok {
		return idx<<2 | flags
	}
	idx := int32(len(d.sets))
	if int(idx) >= d.max {
		d.overflow.Store(true)
		return deadState
	}
	if idx>>chunkShift >= int32(len(d.chunks)) {
		return deadState
	}
	if d.chunks[idx>>chunkShift].Load() == nil {
		d.chunks[idx>>chunkShift].Store(&transChunk{t: make([]atomic.Int32, chunkSize*d.nclass)})
	}
	d.sets = append(d.sets, slices.Clone(set))
	d.index[string(key)] = idx
	return idx<<2 | flags
}

// next returns the state after byte b from state q (deadState stays dead).
func (d *dfa) next(q int32, b byte) int32 {
	idx := q >> 2
	ch := d.chunks[idx>>chunkShift].Load()
	slot := int(idx&(chunkSize-1))*d.nclass + int(d.class[b])
	if v := ch.t[slot].Load(); v != 0 {
		return v - 1
	}
	return d.compute(idx, d.class[b], &ch.t[slot])
}

func (d *dfa) compute(idx int32, c uint8, slot *atomic.Int32) int32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if v := slot.Load(); v != 0 {
		return v - 1
	}
	b := d.rep[c]
	seeds := d.seeds[:0]
	one := true // every seed is the same NFA state
	for _, s := range d.sets[idx] {
		st := &d.nfa.states[s]
		if st.kind == nByte && st.lo <= b && b <= st.hi {
			seeds = append(seeds, st.out)
			one = one && st.out == seeds[0]
		}
	}
	d.seeds = seeds
	q := deadState
	switch {
	case len(seeds) == 0:
	case one && d.single[seeds[0]] != 0:
		// Most transitions reach a state through one NFA state (the end
		// of a character): its closure is memoised.
		q = d.single[seeds[0]] - 1
	case one:
		q = d.intern(d.closure(seeds[:1]))
		d.single[seeds[0]] = q + 1
	default:
		q = d.intern(d.closure(seeds))
	}
	slot.Store(q + 1)
	return q
}

// matchString reports whether the automaton accepts s exactly.
func (d *dfa) matchString(s string) bool {
	q := d.start
	for i := 0; i < len(s); i++ {
		if q = d.next(q, s[i]); q == deadState {
			return false
		}
	}
	return accepting(q)
}
