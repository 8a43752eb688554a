package guide

import (
	"sync"
	"sync/atomic"
)

// Transition memo.
//
// Matchers of one grammar that decode the same kind of output (a batch of
// requests with one schema) pass through the same parser states again and
// again. A node is such a state, shared by every matcher of the grammar:
// its key (stateKey: the thread set with its stacks, by content), its
// finished mask once computed, and the tokens accepted from it so far with
// the node each leads to. On a memo hit Accept only moves the matcher to
// the next node, and the following Mask reads the node's mask: no automaton
// transitions, no key building, no hashing of keys. The matcher's own
// thread set for such a step is rebuilt from the key only if it is needed
// (a token not yet in the memo, Allows).

// node is one parser state of a grammar, shared by its matchers.
type node struct {
	key   string
	done  bool // the grammar may be complete here (EOS allowed)
	empty bool // no thread left: only EOS may follow
	gen   uint32
	// mask is the state's finished mask (nil until a Mask computed it);
	// cachedMask values are never modified once published.
	mask atomic.Pointer[cachedMask]
	// next maps an accepted token to the state after it (under memo.mu).
	next transTable
}

// transTable is an open-addressing map from token to node: one flat
// array of (token, node) slots, linear probing, at most half full. A
// lookup right after a forward pass (caches cold) costs about one miss,
// where a Go map costs several dependent loads.
type transTable struct {
	slots []trans
	n     int
}

type trans struct {
	tok int32
	nx  *node // nil: empty slot
}

func transHash(tok int32) uint32 { return uint32(tok) * 0x9e3779b1 }

// get returns the node after tok, or nil.
func (t *transTable) get(tok int32) *node {
	if len(t.slots) == 0 {
		return nil
	}
	mask := uint32(len(t.slots) - 1)
	for i := transHash(tok) & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.nx == nil {
			return nil
		}
		if s.tok == tok {
			return s.nx
		}
	}
}

// put records tok → nx, reporting whether tok was new.
func (t *transTable) put(tok int32, nx *node) bool {
	if 2*(t.n+1) > len(t.slots) {
		old := t.slots
		t.slots = make([]trans, max(8, 2*len(old)))
		t.n = 0
		for _, s := range old {
			if s.nx != nil {
				t.put(s.tok, s.nx)
			}
		}
	}
	mask := uint32(len(t.slots) - 1)
	for i := transHash(tok) & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.nx == nil {
			*s = trans{tok, nx}
			t.n++
			return true
		}
		if s.tok == tok {
			return false
		}
	}
}

// memo interns a grammar's nodes, bounded in bytes. When full it starts
// over (a new generation): matchers keep the nodes they hold, but old
// nodes learn no new transitions, so what the old generation retains
// stays bounded too.
type memo struct {
	mu    sync.Mutex
	nodes map[string]*node
	gen   uint32
	bytes int
	limit int
}

// Approximate bytes per node (besides its key) and per transition.
const (
	nodeBytes  = 160
	transBytes = 32 // a slot of 16 bytes at most half full
)

func newMemo(limit int) *memo {
	return &memo{nodes: map[string]*node{}, limit: limit}
}

// intern returns the node of key (a stateKey; its first byte is the done
// flag), creating it.
func (c *memo) intern(key []byte, empty bool) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.nodes[string(key)]; n != nil {
		return n
	}
	if c.bytes+len(key)+nodeBytes > c.limit {
		c.nodes = map[string]*node{}
		c.gen++
		c.bytes = 0
	}
	n := &node{key: string(key), done: len(key) > 0 && key[0] == 1, empty: empty, gen: c.gen}
	c.nodes[n.key] = n
	c.bytes += len(key) + nodeBytes
	return n
}

// next returns the node that tok leads to from n, or nil when unknown.
func (c *memo) next(n *node, tok int32) *node {
	c.mu.Lock()
	nx := n.next.get(tok)
	c.mu.Unlock()
	return nx
}

// link records that tok leads from n to nx.
func (c *memo) link(n *node, tok int32, nx *node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.gen != c.gen || c.bytes+transBytes > c.limit {
		return
	}
	if n.next.put(tok, nx) {
		c.bytes += transBytes
	}
}
