package stopstr

import "sort"

// automaton is an Aho–Corasick automaton over a list of stop strings
// (bytes). State 0 is the root; every state is the string spelled by the
// trie path to it. Immutable once built.
type automaton struct {
	stops  []string // the non-empty stop strings, in request order
	maxLen int      // longest stop string, in bytes
	// root is the root's full transition table (the root has no failure
	// link to fall back on, so every byte has an entry; 0 = stay).
	root [256]int32
	// The goto function: the trie children of state s are edgeTo[i] for i
	// in [first[s], first[s+1]), on bytes edgeB[i] in increasing order.
	first  []int32
	edgeB  []byte
	edgeTo []int32
	// fail is each state's failure link: the longest proper suffix of its
	// string that is also a trie state.
	fail []int32
	// depth is each state's string length.
	depth []int32
	// out is, per state, the index (into stops) of the first-listed stop
	// string that is a suffix of the state's string, or -1.
	out []int32
}

// build returns the automaton for stops, or nil when no stop string is
// non-empty. Time and memory are linear in their total length.
func build(stops []string) *automaton {
	// next maps state<<8|byte to the trie child while the trie is built.
	next := map[uint32]int32{}
	ac := &automaton{fail: []int32{0}, depth: []int32{0}, out: []int32{-1}}
	for _, s := range stops {
		if s == "" {
			continue
		}
		idx := int32(len(ac.stops))
		ac.stops = append(ac.stops, s)
		ac.maxLen = max(ac.maxLen, len(s))
		var st int32
		for i := 0; i < len(s); i++ {
			key := uint32(st)<<8 | uint32(s[i])
			child, ok := next[key]
			if !ok {
				child = int32(len(ac.depth))
				next[key] = child
				ac.fail = append(ac.fail, 0)
				ac.depth = append(ac.depth, ac.depth[st]+1)
				ac.out = append(ac.out, -1)
			}
			st = child
		}
		if ac.out[st] < 0 {
			ac.out[st] = idx // a duplicate keeps its first listing
		}
	}
	if len(ac.stops) == 0 {
		return nil
	}
	// Breadth-first over the trie: children lists by state, then failure
	// links and inherited outputs in BFS order (a state's failure target is
	// shallower, so it is final when the state is reached).
	children := make([][]int32, len(ac.depth)) // child states
	labels := make([][]byte, len(ac.depth))    // their bytes
	for key, child := range next {
		parent := int32(key >> 8)
		children[parent] = append(children[parent], child)
		labels[parent] = append(labels[parent], byte(key))
	}
	next = nil
	ac.first = make([]int32, len(ac.depth)+1)
	ac.edgeB = make([]byte, 0, len(ac.depth)-1)
	ac.edgeTo = make([]int32, 0, len(ac.depth)-1)
	for st := range children {
		ac.first[st] = int32(len(ac.edgeB))
		cs, ls := children[st], labels[st]
		sort.Sort(byLabel{cs, ls})
		ac.edgeB = append(ac.edgeB, ls...)
		ac.edgeTo = append(ac.edgeTo, cs...)
	}
	ac.first[len(children)] = int32(len(ac.edgeB))
	for i, c := range children[0] {
		ac.root[labels[0][i]] = c
	}
	queue := append([]int32(nil), children[0]...)
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		for i, c := range children[st] {
			ac.fail[c] = ac.step(ac.fail[st], labels[st][i])
			if f := ac.out[ac.fail[c]]; f >= 0 && (ac.out[c] < 0 || f < ac.out[c]) {
				ac.out[c] = f
			}
			queue = append(queue, c)
		}
	}
	return ac
}

// step returns the state after reading b in state s.
func (ac *automaton) step(s int32, b byte) int32 {
	for s != 0 {
		lo, hi := ac.first[s], ac.first[s+1]
		for lo < hi { // binary search of the sorted edge bytes
			mid := int32(uint32(lo+hi) >> 1)
			if ac.edgeB[mid] < b {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		if lo < ac.first[s+1] && ac.edgeB[lo] == b {
			return ac.edgeTo[lo]
		}
		s = ac.fail[s]
	}
	return ac.root[b]
}

// byLabel sorts a state's children by their byte.
type byLabel struct {
	to []int32
	b  []byte
}

func (x byLabel) Len() int           { return len(x.b) }
func (x byLabel) Less(i, j int) bool { return x.b[i] < x.b[j] }
func (x byLabel) Swap(i, j int) {
	x.b[i], x.b[j] = x.b[j], x.b[i]
	x.to[i], x.to[j] = x.to[j], x.to[i]
}
