package guide

import "math/bits"

// Bitmask is a set of allowed token ids over a vocabulary: a dense bitset,
// plus the sorted list of allowed ids when there are few of them (the
// sampler then works on those ids only). It implements sample.Mask.
type Bitmask struct {
	words  []uint64
	ids    []int32
	sparse bool
	n      int
	// count caches the number of allowed ids after finish (-1: unknown).
	count int
}

// NewBitmask returns an empty mask over n token ids.
func NewBitmask(n int) *Bitmask {
	return &Bitmask{words: make([]uint64, (n+63)/64), n: n, count: -1}
}

// Allowed reports whether token id may be sampled.
func (m *Bitmask) Allowed(id int32) bool {
	if id < 0 || int(id) >= m.n {
		return false
	}
	return m.words[id>>6]&(1<<(uint(id)&63)) != 0
}

// AllowedIDs returns the allowed ids in increasing order when they are few
// (see sparseLimit), or nil when the set is large. The slice belongs to the
// mask and is valid until the mask is next filled.
func (m *Bitmask) AllowedIDs() []int32 {
	if m.sparse {
		return m.ids
	}
	return nil
}

// Words returns the packed bits (bit i of word i/64 is token i), for
// uploading to an accelerator. The slice belongs to the mask.
func (m *Bitmask) Words() []uint64 { return m.words }

// Len returns the vocabulary size the mask covers.
func (m *Bitmask) Len() int { return m.n }

// Count returns the number of allowed ids.
func (m *Bitmask) Count() int {
	if m.sparse {
		return len(m.ids)
	}
	if m.count >= 0 {
		return m.count
	}
	c := 0
	for _, w := range m.words {
		c += bits.OnesCount64(w)
	}
	return c
}

// SetAll allows every id.
func (m *Bitmask) SetAll() {
	for i := range m.words {
		m.words[i] = ^uint64(0)
	}
	if r := m.n & 63; r != 0 {
		m.words[len(m.words)-1] = 1<<uint(r) - 1
	}
	m.sparse, m.ids, m.count = false, m.ids[:0], m.n
}

// clear allows nothing.
func (m *Bitmask) clear() {
	clear(m.words)
	m.sparse, m.ids, m.count = false, m.ids[:0], -1
}

func (m *Bitmask) set(id int32) { m.words[id>>6] |= 1 << (uint(id) & 63) }

// sparseLimit is the largest allowed-id count kept in sparse form.
func sparseLimit(n int) int { return min(max(n/16, 64), 8192) }

// finish computes the sparse id list when few ids are allowed.
func (m *Bitmask) finish() {
	m.ids = m.ids[:0]
	m.sparse = false
	limit := sparseLimit(m.n)
	c := 0
	for _, w := range m.words {
		c += bits.OnesCount64(w)
	}
	m.count = c
	if c > limit {
		return
	}
	for i, w := range m.words {
		for w != 0 {
			m.ids = append(m.ids, int32(i*64+bits.TrailingZeros64(w)))
			w &= w - 1
		}
	}
	m.sparse = true
}

// copyFrom makes m equal to o (same vocabulary size).
func (m *Bitmask) copyFrom(o *Bitmask) {
	copy(m.words, o.words)
	m.ids = append(m.ids[:0], o.ids...)
	m.sparse, m.count = o.sparse, o.count
}

// tokenSet is an immutable set of token ids stored densely or as a list,
// whichever is smaller.
type tokenSet struct {
	words []uint64
	ids   []int32
}

func newTokenSet(words []uint64) tokenSet {
	c := 0
	for _, w := range words {
		c += bits.OnesCount64(w)
	}
	if c*32 < len(words)*64 {
		ids := make([]int32, 0, c)
		for i, w := range words {
			for w != 0 {
				ids = append(ids, int32(i*64+bits.TrailingZeros64(w)))
				w &= w - 1
			}
		}
		return tokenSet{ids: ids}
	}
	return tokenSet{words: append([]uint64(nil), words...)}
}

// orInto adds the set to dst.
func (s *tokenSet) orInto(dst []uint64) {
	if s.words != nil {
		for i, w := range s.words {
			dst[i] |= w
		}
		return
	}
	for _, id := range s.ids {
		dst[id>>6] |= 1 << (uint(id) & 63)
	}
}

func (s *tokenSet) bytes() int { return 8*len(s.words) + 4*len(s.ids) + 48 }

func trailingZeros(w uint64) int { return bits.TrailingZeros64(w) }
