package tokenizer

import (
	"container/heap"
	"math"
)

// merge is the result of merging a pair of tokens: its rank (lower merges
// first) and the merged token's id.
type merge struct {
	rank int32
	id   int32
}

const noRank = math.MaxInt32

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func (m *Model) rankOf(a, b int32) int32 {
	if mg, ok := m.merges[pairKey(a, b)]; ok {
		return mg.rank
	}
	return noRank
}

// naiveLimit is the symbol count up to which the quadratic merge loops are
// used; longer words go through the heap versions.
const naiveLimit = 256

// bpeRank merges syms (token ids) in place by merge rank, lowest rank first
// and leftmost first among equal ranks, exactly as Hugging Face tokenizers'
// Word::merge_all and llama.cpp's BPE do. It returns the merged ids.
func (m *Model) bpeRank(sc *scratch, syms []int32) []int32 {
	if len(syms) < 2 {
		return syms
	}
	if len(syms) > naiveLimit {
		return m.bpeRankHeap(sc, syms)
	}
	ranks := sc.ranks[:0]
	for i := 0; i+1 < len(syms); i++ {
		ranks = append(ranks, m.rankOf(syms[i], syms[i+1]))
	}
	for {
		best, bestRank := -1, int32(noRank)
		for i, r := range ranks {
			if r < bestRank {
				best, bestRank = i, r
			}
		}
		if best < 0 {
			break
		}
		syms[best] = m.merges[pairKey(syms[best], syms[best+1])].id
		syms = append(syms[:best+1], syms[best+2:]...)
		ranks = append(ranks[:best], ranks[best+1:]...)
		if best > 0 {
			ranks[best-1] = m.rankOf(syms[best-1], syms[best])
		}
		if best < len(ranks) {
			ranks[best] = m.rankOf(syms[best], syms[best+1])
		}
	}
	sc.ranks = ranks
	return syms
}

// rankEntry is a candidate merge in the heap version.
type rankEntry struct {
	rank int32
	pos  int32 // index of the left symbol
	a, b int32 // the pair's ids when pushed
}

type rankHeap []rankEntry

func (h rankHeap) Len() int { return len(h) }
func (h rankHeap) Less(i, j int) bool {
	return h[i].rank < h[j].rank || (h[i].rank == h[j].rank && h[i].pos < h[j].pos)
}
func (h rankHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *rankHeap) Push(x any)   { *h = append(*h, x.(rankEntry)) }
func (h *rankHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (m *Model) bpeRankHeap(sc *scratch, syms []int32) []int32 {
	n := len(syms)
	next := make([]int32, n)
	prev := make([]int32, n)
	alive := make([]bool, n)
	for i := range syms {
		next[i], prev[i], alive[i] = int32(i+1), int32(i-1), true
	}
	next[n-1] = -1
	h := rankHeap(sc.heap[:0])
	push := func(i int32) {
		if i < 0 || next[i] < 0 {
			return
		}
		a, b := syms[i], syms[next[i]]
		if r := m.rankOf(a, b); r != noRank {
			heap.Push(&h, rankEntry{r, i, a, b})
		}
	}
	for i := 0; i+1 < n; i++ {
		push(int32(i))
	}
	for h.Len() > 0 {
		e := heap.Pop(&h).(rankEntry)
		i := e.pos
		if !alive[i] || next[i] < 0 || syms[i] != e.a || syms[next[i]] != e.b {
			continue
		}
		j := next[i]
		syms[i] = m.merges[pairKey(e.a, e.b)].id
		alive[j] = false
		next[i] = next[j]
		if next[j] >= 0 {
			prev[next[j]] = i
		}
		push(prev[i])
		push(i)
	}
	sc.heap = h[:0]
	out := syms[:0]
	for i := int32(0); i >= 0 && int(i) < n; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}

// spmSym is a symbol of the SentencePiece merge: bytes [start, end) of the
// chunk.
type spmSym struct{ start, end int32 }

// bpeScore tokenizes chunk (text with spaces already turned into "▁") by
// SentencePiece-style merges: repeatedly merge the adjacent pair whose
// concatenation is a vocabulary token with the highest score, leftmost
// first among equal scores (llama.cpp's llm_tokenizer_spm, llama2.c's
// encode). Symbols left that are not tokens become byte tokens.
func (m *Model) bpeScore(sc *scratch, chunk []byte, out []int32) []int32 {
	syms := sc.spm[:0]
	for i := 0; i < len(chunk); {
		n := utf8Len(chunk[i])
		if i+n > len(chunk) {
			n = len(chunk) - i
		}
		syms = append(syms, spmSym{int32(i), int32(i + n)})
		i += n
	}
	if len(syms) > naiveLimit {
		syms = m.bpeScoreHeap(chunk, syms)
	} else {
		scores := sc.scores[:0]
		for i := 0; i+1 < len(syms); i++ {
			scores = append(scores, m.pairScore(chunk, syms[i], syms[i+1]))
		}
		for {
			best := -1
			bestScore := float32(math.Inf(-1))
			for i, s := range scores {
				if s > bestScore {
					best, bestScore = i, s
				}
			}
			if best < 0 {
				break
			}
			syms[best].end = syms[best+1].end
			syms = append(syms[:best+1], syms[best+2:]...)
			scores = append(scores[:best], scores[best+1:]...)
			if best > 0 {
				scores[best-1] = m.pairScore(chunk, syms[best-1], syms[best])
			}
			if best < len(scores) {
				scores[best] = m.pairScore(chunk, syms[best], syms[best+1])
			}
		}
		sc.scores = scores
	}
	for _, s := range syms {
		if id, ok := m.ids[string(chunk[s.start:s.end])]; ok {
			out = append(out, id)
			continue
		}
		for _, b := range chunk[s.start:s.end] {
			if id := m.byteTok[b]; id >= 0 {
				out = append(out, id)
			} else if m.unk >= 0 {
				out = append(out, m.unk)
			}
		}
	}
	sc.spm = syms[:0]
	return out
}

// noScore marks a pair whose concatenation is not a token.
var noScore = float32(math.Inf(-1))

func (m *Model) pairScore(chunk []byte, a, b spmSym) float32 {
	if id, ok := m.ids[string(chunk[a.start:b.end])]; ok {
		return m.scores[id]
	}
	return noScore
}

type scoreEntry struct {
	score      float32
	left, size int32
}

type scoreHeap []scoreEntry

func (h scoreHeap) Len() int { return len(h) }
func (h scoreHeap) Less(i, j int) bool {
	return h[i].score > h[j].score || (h[i].score == h[j].score && h[i].left < h[j].left)
}
func (h scoreHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *scoreHeap) Push(x any)   { *h = append(*h, x.(scoreEntry)) }
func (h *scoreHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (m *Model) bpeScoreHeap(chunk []byte, syms []spmSym) []spmSym {
	n := len(syms)
	next := make([]int32, n)
	prev := make([]int32, n)
	for i := range syms {
		next[i], prev[i] = int32(i+1), int32(i-1)
	}
	next[n-1] = -1
	var h scoreHeap
	try := func(l int32) {
		if l < 0 || next[l] < 0 {
			return
		}
		r := next[l]
		if id, ok := m.ids[string(chunk[syms[l].start:syms[r].end])]; ok {
			heap.Push(&h, scoreEntry{m.scores[id], l, syms[r].end - syms[l].start})
		}
	}
	for i := int32(0); i+1 < int32(n); i++ {
		try(i)
	}
	for h.Len() > 0 {
		e := heap.Pop(&h).(scoreEntry)
		l := e.left
		r := next[l]
		if syms[l].end <= syms[l].start || r < 0 || syms[r].end-syms[l].start != e.size {
			continue
		}
		syms[l].end = syms[r].end
		syms[r].end = syms[r].start // dead
		next[l] = next[r]
		if next[r] >= 0 {
			prev[next[r]] = l
		}
		try(prev[l])
		try(l)
	}
	out := syms[:0]
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}

// utf8Len is the length of the UTF-8 sequence that starts with b, by its
// high nibble as llama.cpp's unicode_len_utf8 computes it.
func utf8Len(b byte) int {
	return int([16]uint8{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}[b>>4])
}
