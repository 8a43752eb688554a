package guide

import (
	"bytes"
	"errors"
	"fmt"
)

// thread is one way the parser may be positioned: inside the terminal at
// syms[pos], in automaton state q, with return stack stk.
type thread struct{ pos, q, stk int32 }

// frame is one return-stack entry (interned: equal stacks share an id;
// id 0 is the empty stack).
type frame struct{ ret, parent int32 }

// step is the matcher state after one accepted token: the thread set is
// hist[off:next step's off]. A step reached through the grammar's
// transition memo has off -1 until its threads are needed: nd then holds
// the state (see memo.go), and materialize rebuilds the threads from it.
type step struct {
	off        int32
	done       bool // the grammar is complete: EOS may follow
	eos        bool // EOS was accepted
	activation bool // this token ended the reasoning phase
	nd         *node
}

// Limits that keep hostile grammars from exhausting time or memory; past
// them the matcher drops alternatives (it stays sound: it never allows
// output outside the grammar).
const (
	maxThreads    = 4096
	maxExpansions = 1 << 16
)

// ErrRejected is returned by Accept for a token the constraint forbids.
var ErrRejected = errors.New("guide: token rejected by the constraint")

// Matcher tracks one request's progress through a Grammar and computes the
// allowed next tokens. It is not safe for concurrent use; many Matchers
// may share a Grammar.
type Matcher struct {
	g      *Grammar
	frames []frame
	intern map[uint64]int32
	hist   []thread
	steps  []step

	dormant      bool // reasoning phase: no constraint yet
	dormantSteps int
	// activated is the number of steps in steps that ended the reasoning
	// phase (0 or 1), kept so that Accepted is O(1).
	activated int
	tail      []byte

	// DeadEnds counts masks where nothing but EOS was possible although
	// the grammar was incomplete (should stay 0).
	DeadEnds int

	sa, sb     []thread
	arena      []thread
	offs       []int
	key        []byte
	rets       []int32
	expansions int
}

// NewMatcher starts a matcher at the beginning of the grammar. With
// afterReasoning it lets everything through until the reasoning end marker
// ("</think>" unless configured) has been generated, then allows up to 20
// whitespace bytes before the constrained answer.
func (g *Grammar) NewMatcher(afterReasoning bool) *Matcher {
	m := &Matcher{
		g:       g,
		frames:  []frame{{-1, -1}},
		intern:  map[uint64]int32{},
		dormant: afterReasoning,
		offs:    make([]int, g.vocab.maxDepth+2),
		steps:   make([]step, 0, 64), // grows with the output: start past the small sizes
	}
	start := g.stub
	if afterReasoning {
		start = g.stubWS
	}
	done := m.closure(start, 0, &m.hist, 0)
	m.steps = append(m.steps, step{off: 0, done: done})
	return m
}

// cur returns the current thread set and completeness.
func (m *Matcher) cur() ([]thread, step) {
	s := &m.steps[len(m.steps)-1]
	if s.off < 0 {
		m.materialize(s)
	}
	return m.hist[s.off:], *s
}

// curEmpty reports whether the current thread set is empty, without
// materializing it.
func (m *Matcher) curEmpty() bool {
	s := &m.steps[len(m.steps)-1]
	if s.off < 0 {
		return s.nd.empty
	}
	return len(m.hist) == int(s.off)
}

// materialize rebuilds the threads of s (the last step, reached through
// the memo) from its node's key, appending them to hist.
func (m *Matcher) materialize(s *step) {
	s.off = int32(len(m.hist))
	k := s.nd.key[1:] // after the done flag
	get := func() int32 {
		var u uint32
		for sh := uint(0); ; sh += 7 {
			c := k[0]
			k = k[1:]
			u |= uint32(c&0x7f) << sh
			if c < 0x80 {
				return int32(u)
			}
		}
	}
	for len(k) > 0 {
		pos, q := get(), get()
		rets := m.rets[:0]
		for r := get(); r != 0; r = get() {
			rets = append(rets, r-1)
		}
		m.rets = rets
		var stk int32
		for j := len(rets) - 1; j >= 0; j-- {
			stk = m.frameID(rets[j], stk)
		}
		m.hist = append(m.hist, thread{pos, q, stk})
	}
}

// push returns the stack with ret pushed on parent. A return to the end
// of an alternative is not pushed (tail call), so right recursion such
// as list tails does not grow the stack.
func (m *Matcher) push(ret, parent int32) int32 {
	if m.g.syms[ret] == symEnd {
		return parent
	}
	return m.frameID(ret, parent)
}

// frameID interns the frame (ret, parent).
func (m *Matcher) frameID(ret, parent int32) int32 {
	k := uint64(uint32(ret))<<32 | uint64(uint32(parent))
	if id, ok := m.intern[k]; ok {
		return id
	}
	m.frames = append(m.frames, frame{ret, parent})
	id := int32(len(m.frames) - 1)
	m.intern[k] = id
	return id
}

func addThread(out *[]thread, base int, t thread) {
	s := *out
	for i := base; i < len(s); i++ {
		if s[i] == t {
			return
		}
	}
	if len(s)-base >= maxThreads {
		return
	}
	*out = append(s, t)
}

// closure adds to out[base:] the threads reached from position pos with
// stack stk without consuming input, reporting whether the grammar can be
// complete there.
func (m *Matcher) closure(pos, stk int32, out *[]thread, base int) bool {
	m.expansions++
	if m.expansions > maxExpansions {
		return false
	}
	g := m.g
	v := g.syms[pos]
	switch {
	case v >= 0:
		q0 := g.terms[v].d.start
		if live(q0) {
			addThread(out, base, thread{pos, q0, stk})
		}
		if accepting(q0) {
			return m.closure(pos+1, stk, out, base)
		}
		return false
	case v == symEnd:
		if stk == 0 {
			return true
		}
		f := m.frames[stk]
		return m.closure(f.ret, f.parent, out, base)
	}
	done := false
	ret := m.push(pos+1, stk)
	for _, a := range g.rules[ruleOf(v)] {
		if m.closure(a, ret, out, base) {
			done = true
		}
	}
	return done
}

// stepSet advances every thread of from over byte b into out[base:],
// reporting whether the grammar can be complete after b.
func (m *Matcher) stepSet(from []thread, b byte, out *[]thread, base int) bool {
	g := m.g
	done := false
	for _, th := range from {
		q := g.terms[g.syms[th.pos]].d.next(th.q, b)
		if q == deadState {
			continue
		}
		if live(q) {
			addThread(out, base, thread{th.pos, q, th.stk})
		}
		if accepting(q) && m.closure(th.pos+1, th.stk, out, base) {
			done = true
		}
	}
	return done
}

// feed runs bytes through the current set, returning the resulting set (in
// a scratch buffer) or ok=false when they are not accepted.
func (m *Matcher) feed(bs []byte) (set []thread, done, ok bool) {
	cur, st := m.cur()
	done = st.done
	a := append(m.sa[:0], cur...)
	b := m.sb[:0]
	for i, c := range bs {
		m.expansions = 0
		b = b[:0]
		done = m.stepSet(a, c, &b, 0)
		if len(b) == 0 && !(done && i == len(bs)-1) {
			m.sa, m.sb = a, b
			return nil, false, false
		}
		a, b = b, a
	}
	m.sa, m.sb = a, b
	return a, done, true
}

// Accept advances the matcher over a sampled token. A token the
// constraint forbids returns an error wrapping ErrRejected and leaves the
// state unchanged.
func (m *Matcher) Accept(tok int32) error {
	v := m.g.vocab
	if tok < 0 || int(tok) >= len(v.toks) {
		return fmt.Errorf("guide: token %d out of range", tok)
	}
	if m.dormant {
		return m.acceptDormant(tok)
	}
	st := m.steps[len(m.steps)-1]
	prev := st.nd
	if prev != nil {
		// A token already accepted from this state (never EOS or a
		// special token) leads where it led before.
		if nx := m.g.memo.next(prev, tok); nx != nil {
			m.steps = append(m.steps, step{off: -1, done: nx.done, nd: nx})
			return nil
		}
	}
	if st.eos && !v.isEOS(tok) {
		return fmt.Errorf("guide: token %d after EOS: %w", tok, ErrRejected)
	}
	if v.isEOS(tok) {
		if !st.done && !m.curEmpty() {
			return fmt.Errorf("guide: EOS before the output is complete: %w", ErrRejected)
		}
		m.steps = append(m.steps, step{off: int32(len(m.hist)), done: true, eos: true})
		return nil
	}
	if v.special[tok] || len(v.toks[tok]) == 0 {
		return fmt.Errorf("guide: special token %d: %w", tok, ErrRejected)
	}
	set, done, ok := m.feed(v.toks[tok])
	if !ok {
		return fmt.Errorf("guide: token %d %q: %w", tok, v.toks[tok], ErrRejected)
	}
	m.commit(set, done, false)
	nx := m.node()
	if prev != nil {
		m.g.memo.link(prev, tok, nx)
	}
	return nil
}

// node returns the memo node of the current (non-EOS) state, interning it.
func (m *Matcher) node() *node {
	s := &m.steps[len(m.steps)-1]
	if s.nd == nil {
		cur, st := m.cur()
		s.nd = m.g.memo.intern(m.stateKey(cur, st.done), len(cur) == 0)
	}
	return s.nd
}

func (m *Matcher) commit(set []thread, done, activation bool) {
	off := int32(len(m.hist))
	m.hist = append(m.hist, set...)
	m.steps = append(m.steps, step{off: off, done: done, activation: activation})
	if activation {
		m.activated++
	}
}

func (m *Matcher) acceptDormant(tok int32) error {
	m.dormantSteps++
	end := m.g.reasoningEnd
	m.tail = append(m.tail, m.g.vocab.toks[tok]...)
	i := bytes.Index(m.tail, end)
	if i < 0 {
		if keep := len(end) - 1; len(m.tail) > keep {
			m.tail = append(m.tail[:0], m.tail[len(m.tail)-keep:]...)
		}
		return nil
	}
	rest := m.tail[i+len(end):]
	m.dormant = false
	m.tail = m.tail[:0]
	if len(rest) == 0 {
		cur, st := m.cur()
		set := append(m.sa[:0], cur...)
		m.sa = set
		m.commit(set, st.done, true)
		return nil
	}
	set, done, ok := m.feed(rest)
	if !ok {
		m.dormant = true
		m.dormantSteps--
		return fmt.Errorf("guide: text after the reasoning end %q: %w", rest, ErrRejected)
	}
	m.commit(set, done, true)
	return nil
}

// Allows reports whether tok would be accepted now, without changing the
// state (cheaper than a full mask when checking the sampled token first).
func (m *Matcher) Allows(tok int32) bool {
	v := m.g.vocab
	if tok < 0 || int(tok) >= len(v.toks) {
		return false
	}
	if m.dormant {
		return true
	}
	cur, st := m.cur()
	if v.isEOS(tok) {
		return st.done || st.eos || len(cur) == 0
	}
	if st.eos {
		return false
	}
	if v.special[tok] || len(v.toks[tok]) == 0 {
		return false
	}
	_, _, ok := m.feed(v.toks[tok])
	return ok
}

// Rollback undoes the last n accepted tokens (speculative decoding,
// jump-forward retokenisation).
func (m *Matcher) Rollback(n int) error {
	if n < 0 || n > m.Accepted() {
		return fmt.Errorf("guide: rollback %d of %d tokens", n, m.Accepted())
	}
	for ; n > 0; n-- {
		if m.dormant {
			m.dormantSteps--
			continue
		}
		last := m.steps[len(m.steps)-1]
		if len(m.steps) == 1 {
			// Tokens let through before EndReasoning.
			m.dormantSteps--
			continue
		}
		m.steps = m.steps[:len(m.steps)-1]
		if last.off >= 0 {
			m.hist = m.hist[:last.off]
		}
		if last.activation {
			m.activated--
			m.dormant = true
			m.dormantSteps--
			m.tail = m.tail[:0]
		}
	}
	return nil
}

// Accepted returns the number of tokens accepted so far.
func (m *Matcher) Accepted() int { return len(m.steps) - 1 + m.dormantSteps - m.activated }

// IsComplete reports whether the output so far is a complete word of the
// grammar, so EOS is allowed now.
func (m *Matcher) IsComplete() bool {
	if m.dormant {
		return false
	}
	st := m.steps[len(m.steps)-1]
	return st.done || st.eos || m.curEmpty()
}

// IsDone reports whether generation must end: EOS was accepted, or the
// output is complete and nothing but EOS may follow.
func (m *Matcher) IsDone() bool {
	if m.dormant {
		return false
	}
	return m.steps[len(m.steps)-1].eos || m.curEmpty()
}

// Dormant reports whether the matcher is still waiting for the end of
// reasoning (every token allowed).
func (m *Matcher) Dormant() bool { return m.dormant }

// EndReasoning starts constraining now (the prompt already closed the
// reasoning block).
func (m *Matcher) EndReasoning() { m.dormant = false }

// Mask fills dst (from NewBitmask(vocab.Size()); another size is
// reallocated) with the tokens allowed next.
// EOS is allowed only when the output is complete, and is the only token
// allowed when nothing else can follow (or, should the matcher ever reach
// a dead end, forced and counted in DeadEnds).
func (m *Matcher) Mask(dst *Bitmask) {
	if n := m.g.vocab.Size(); dst.n != n {
		*dst = *NewBitmask(n) // wrong size: resize rather than panic
	}
	if m.dormant {
		dst.SetAll()
		return
	}
	if m.steps[len(m.steps)-1].eos {
		dst.clear()
		m.setEOS(dst)
		dst.finish()
		return
	}
	nd := m.node()
	if e := nd.mask.Load(); e != nil {
		m.g.masks.hits.Add(1)
		dst.load(e)
		return
	}
	key := append(m.key[:0], nd.key...)
	m.key = key
	if e := m.g.masks.get(key); e != nil {
		nd.mask.Store(e)
		dst.load(e)
		return
	}
	cur, st := m.cur()
	dst.clear()
	if st.done {
		m.setEOS(dst)
	}
	m.fill(dst, cur)
	dst.finish()
	if dst.Count() == 0 {
		m.DeadEnds++
		m.setEOS(dst)
		dst.finish()
		return
	}
	nd.mask.Store(m.g.masks.put(key, dst))
}

func (m *Matcher) setEOS(dst *Bitmask) {
	for _, e := range m.g.vocab.eos {
		dst.set(e)
	}
}

// stateKey serialises the thread set with its stacks by content, so equal
// states of different matchers share cache entries.
func (m *Matcher) stateKey(set []thread, done bool) []byte {
	k := m.key[:0]
	if done {
		k = append(k, 1)
	} else {
		k = append(k, 0)
	}
	put := func(v int32) {
		u := uint32(v)
		for u >= 0x80 {
			k = append(k, byte(u)|0x80)
			u >>= 7
		}
		k = append(k, byte(u))
	}
	for _, th := range set {
		put(th.pos)
		put(th.q)
		for s := th.stk; s != 0; s = m.frames[s].parent {
			put(m.frames[s].ret + 1)
		}
		put(0)
	}
	m.key = k
	return k
}

// fill ORs into dst every token some thread of set accepts.
func (m *Matcher) fill(dst *Bitmask, set []thread) {
	g := m.g
	for _, th := range set {
		t := g.terms[g.syms[th.pos]]
		im := t.innerFor(th.q, g.vocab)
		im.set.orInto(dst.words)
		if len(im.bounds) == 0 {
			continue
		}
		m.expansions = 0
		cont := m.sb[:0]
		m.closure(th.pos+1, th.stk, &cont, 0)
		m.sb = cont
		if len(cont) == 0 {
			continue
		}
		for _, n := range im.bounds {
			m.walk(im.tr, n, cont, dst)
		}
	}
}

// walk marks in dst the tokens below trie node n whose bytes after n are
// accepted starting from the thread set start.
func (m *Matcher) walk(tr *trie, n int32, start []thread, dst *Bitmask) {
	nodes := tr.nodes
	d0 := int(nodes[n].depth)
	arena := append(m.arena[:0], start...)
	offs := m.offs
	offs[0], offs[1] = 0, len(arena)
	for i := n + 1; i < nodes[n].end; {
		nd := &nodes[i]
		rd := int(nd.depth) - d0
		parent := arena[offs[rd-1]:offs[rd]]
		arena = arena[:offs[rd]]
		m.expansions = 0
		done := m.stepSet(parent, nd.b, &arena, offs[rd])
		alive := len(arena) > offs[rd]
		if alive || done {
			for id := nd.tok; id >= 0; id = tr.same[id] {
				dst.set(id)
			}
		}
		if !alive {
			i = nd.end
			continue
		}
		offs[rd+1] = len(arena)
		i++
	}
	m.arena = arena
}
