// Package kvcache hands out KV-cache block ids to the scheduler and keeps the
// prefix cache: full blocks are remembered by a chained hash of their tokens
// so a later request with the same prefix reuses them instead of recomputing.
//
// The pool deals in block ids only; the physical KV tensors live in the
// executor. Position p of a request lives in block BlockTable[p/BlockSize]
// at offset p%BlockSize.
//
// Block life cycle:
//
//   - free and uncached: on the free list, evicted first;
//   - in use: reference count ≥ 1, off the free list;
//   - free and cached: reference count 0, back on the free list (at the
//     tail, least recently used first) but still findable by hash until an
//     allocation evicts it.
//
// A block is shared (reference count > 1) when several requests hit the
// same cached prefix. Blocks freed by a request are returned tail first, so
// the end of a chain is evicted before its beginning (vLLM's order).
//
// Hashes are 64-bit (parent hash, token ids) digests; collisions are
// astronomically unlikely for realistic cache sizes and are not checked.
//
// # Sliding-window group
//
// A model whose sliding-window layers keep their own block table (the
// scheduler's hybrid layout, vLLM's KV-cache groups) takes both tables'
// blocks from one Pool: a block id then holds one group's layers. The
// window table of a request marks blocks it gave back (wholly before the
// window) with NoBlock. The window group's full blocks are cached under
// WindowHash of the full group's chained hash, so a prefix hit can take the
// window blocks it needs (Has, AcquireOne).
//
// A Pool is not safe for concurrent use; the scheduler owns it.
package kvcache

// NoHash marks a block that is not in the prefix cache.
const NoHash uint64 = 0

// NoBlock marks a block-table entry that holds no block: a sliding-window
// table's entries for blocks wholly before the window. Free skips it.
const NoBlock int32 = -1

// Stats are the pool's usage counters.
type Stats struct {
	NumBlocks int
	NumFree   int     // free blocks, cached or not
	Usage     float32 // 1 - NumFree/NumBlocks
	NumCached int     // blocks currently findable by hash
	Queries   int64   // cumulative prompt tokens looked up
	Hits      int64   // cumulative prompt tokens found in the cache
	Resets    int64   // cumulative Reset calls
}

type block struct {
	ref  int32
	prev int32 // free-list links; -1 at the ends
	next int32
	free bool
	hash uint64 // NoHash when not cached
}

// Pool is a fixed set of KV blocks with a free list and a prefix cache.
type Pool struct {
	blockSize int
	blocks    []block
	head      int32 // free list head (evicted first); -1 when empty
	tail      int32
	numFree   int
	cached    map[uint64]int32
	queries   int64
	hits      int64
	resets    int64
}

// New returns a pool of numBlocks blocks of blockSize token positions each.
// Both must be positive.
func New(numBlocks, blockSize int) *Pool {
	if numBlocks < 1 {
		numBlocks = 1
	}
	if blockSize < 1 {
		blockSize = 16
	}
	p := &Pool{
		blockSize: blockSize,
		blocks:    make([]block, numBlocks),
		head:      -1,
		tail:      -1,
		cached:    make(map[uint64]int32, numBlocks),
	}
	for i := range p.blocks {
		p.blocks[i] = block{prev: -1, next: -1}
		p.pushTail(int32(i))
	}
	return p
}

// BlockSize is the number of token positions per block.
func (p *Pool) BlockSize() int { return p.blockSize }

// NumBlocks is the pool's size.
func (p *Pool) NumBlocks() int { return len(p.blocks) }

// NumFree is the number of blocks an allocation may take (free ones,
// including cached blocks nobody uses).
func (p *Pool) NumFree() int { return p.numFree }

// BlocksFor is the number of blocks needed to hold n token positions.
func (p *Pool) BlocksFor(n int) int { return (n + p.blockSize - 1) / p.blockSize }

// Usage is the fraction of blocks in use, 0..1.
func (p *Pool) Usage() float32 {
	return 1 - float32(p.numFree)/float32(len(p.blocks))
}

// Stats returns the usage counters.
func (p *Pool) Stats() Stats {
	return Stats{
		NumBlocks: len(p.blocks),
		NumFree:   p.numFree,
		Usage:     p.Usage(),
		NumCached: len(p.cached),
		Queries:   p.queries,
		Hits:      p.hits,
		Resets:    p.resets,
	}
}

// RecordLookup adds one prefix lookup of queried tokens, hit of which were
// found, to the hit-rate counters.
func (p *Pool) RecordLookup(queried, hit int) {
	p.queries += int64(queried)
	p.hits += int64(hit)
}

// Match returns how many leading hashes name cached blocks (the length of
// the cached prefix, in blocks). It changes nothing.
func (p *Pool) Match(hashes []uint64) int {
	for i, h := range hashes {
		if _, ok := p.cached[h]; !ok {
			return i
		}
	}
	return len(hashes)
}

// Acquire takes a reference on the cached blocks of the first n hashes
// (n ≤ Match(hashes)) and appends their ids to dst. Blocks nobody used
// leave the free list.
func (p *Pool) Acquire(hashes []uint64, n int, dst []int32) []int32 {
	for _, h := range hashes[:n] {
		id, ok := p.cached[h]
		if !ok {
			break // caller broke the contract; return what we have
		}
		b := &p.blocks[id]
		if b.free {
			p.unlink(id)
		}
		b.ref++
		dst = append(dst, id)
	}
	return dst
}

// Has reports whether hash names a cached block. It changes nothing.
func (p *Pool) Has(hash uint64) bool {
	_, ok := p.cached[hash]
	return ok
}

// AcquireOne takes a reference on the cached block named by hash and
// returns its id, or NoBlock when none is cached.
func (p *Pool) AcquireOne(hash uint64) int32 {
	id, ok := p.cached[hash]
	if !ok {
		return NoBlock
	}
	b := &p.blocks[id]
	if b.free {
		p.unlink(id)
	}
	b.ref++
	return id
}

// Allocate appends n fresh blocks to dst, evicting cached free blocks from
// the head of the free list as needed. It is all or nothing: when fewer
// than n blocks are free it returns dst unchanged and false.
func (p *Pool) Allocate(n int, dst []int32) ([]int32, bool) {
	if n > p.numFree {
		return dst, false
	}
	for range n {
		id := p.head
		p.unlink(id)
		b := &p.blocks[id]
		if b.hash != NoHash {
			if cur, ok := p.cached[b.hash]; ok && cur == id {
				delete(p.cached, b.hash)
			}
			b.hash = NoHash
		}
		b.ref = 1
		dst = append(dst, id)
	}
	return dst, true
}

// Free drops one reference on each block. Blocks that reach zero go back to
// the free list: cached ones at the tail (kept as long as possible, the
// last block of the chain nearest the head), uncached ones at the head
// (reused first). Blocks are processed last to first.
func (p *Pool) Free(blocks []int32) {
	for i := len(blocks) - 1; i >= 0; i-- {
		id := blocks[i]
		if id < 0 || int(id) >= len(p.blocks) {
			continue
		}
		b := &p.blocks[id]
		if b.ref <= 0 {
			continue // double free: ignore rather than corrupt the list
		}
		b.ref--
		if b.ref > 0 {
			continue
		}
		if b.hash != NoHash {
			p.pushTail(id)
		} else {
			p.pushHead(id)
		}
	}
}

// Commit records that block id (in use, fully written) holds the tokens
// summarised by hash, making it findable by later requests. A hash already
// cached in another block is left alone (the duplicate block stays
// uncached); a block already cached is not re-keyed.
func (p *Pool) Commit(id int32, hash uint64) {
	if hash == NoHash || id < 0 || int(id) >= len(p.blocks) {
		return
	}
	b := &p.blocks[id]
	if b.hash != NoHash {
		return
	}
	if _, ok := p.cached[hash]; ok {
		return
	}
	b.hash = hash
	p.cached[hash] = id
}

// Reset forgets every cached block (the reset_prefix_cache utility call).
// Blocks in use stay allocated; they simply stop being findable. It returns
// the number of blocks forgotten.
func (p *Pool) Reset() int {
	n := len(p.cached)
	for h, id := range p.cached {
		p.blocks[id].hash = NoHash
		delete(p.cached, h)
	}
	p.resets++
	return n
}

// RefCount returns the reference count of block id (for tests and checks).
func (p *Pool) RefCount(id int32) int { return int(p.blocks[id].ref) }

// CheckInvariants verifies the free list against the blocks' states and
// returns a description of the first inconsistency, or "" (for tests).
func (p *Pool) CheckInvariants() string {
	n := 0
	prev := int32(-1)
	for id := p.head; id != -1; id = p.blocks[id].next {
		b := p.blocks[id]
		if !b.free || b.ref != 0 || b.prev != prev {
			return "free list holds a block in use or has a bad link"
		}
		prev = id
		n++
		if n > len(p.blocks) {
			return "free list has a cycle"
		}
	}
	if prev != p.tail || n != p.numFree {
		return "free list length or tail disagrees with numFree"
	}
	inUse := 0
	for _, b := range p.blocks {
		if b.ref > 0 {
			inUse++
		}
	}
	if inUse+p.numFree != len(p.blocks) {
		return "blocks neither free nor in use"
	}
	for h, id := range p.cached {
		if p.blocks[id].hash != h {
			return "cache map and block hash disagree"
		}
	}
	return ""
}

func (p *Pool) pushTail(id int32) {
	b := &p.blocks[id]
	b.free = true
	b.next = -1
	b.prev = p.tail
	if p.tail >= 0 {
		p.blocks[p.tail].next = id
	} else {
		p.head = id
	}
	p.tail = id
	p.numFree++
}

func (p *Pool) pushHead(id int32) {
	b := &p.blocks[id]
	b.free = true
	b.prev = -1
	b.next = p.head
	if p.head >= 0 {
		p.blocks[p.head].prev = id
	} else {
		p.tail = id
	}
	p.head = id
	p.numFree++
}

func (p *Pool) unlink(id int32) {
	b := &p.blocks[id]
	if b.prev >= 0 {
		p.blocks[b.prev].next = b.next
	} else {
		p.head = b.next
	}
	if b.next >= 0 {
		p.blocks[b.next].prev = b.prev
	} else {
		p.tail = b.prev
	}
	b.prev, b.next = -1, -1
	b.free = false
	p.numFree--
}
