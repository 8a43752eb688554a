package kvcache

import (
	"slices"
	"testing"
)

func TestAllocateFree(t *testing.T) {
	p := New(4, 16)
	got, ok := p.Allocate(3, nil)
	if !ok || len(got) != 3 || p.NumFree() != 1 {
		t.Fatalf("allocate 3: %v %v free=%d", got, ok, p.NumFree())
	}
	if _, ok := p.Allocate(2, nil); ok {
		t.Fatal("allocated more than free")
	}
	if p.NumFree() != 1 {
		t.Fatal("failed allocation changed the pool")
	}
	if u := p.Usage(); u != 0.75 {
		t.Fatalf("usage %v, want 0.75", u)
	}
	p.Free(got)
	p.Free(got) // double free is ignored
	if p.NumFree() != 4 {
		t.Fatalf("free=%d after free", p.NumFree())
	}
	if msg := p.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
}

func TestPrefixCacheLifecycle(t *testing.T) {
	p := New(4, 2)
	toks := []int32{1, 2, 3, 4, 5}
	hashes := AppendHashes(nil, toks, 2)
	if len(hashes) != 2 {
		t.Fatalf("want 2 full-block hashes, got %d", len(hashes))
	}
	a, _ := p.Allocate(3, nil)
	p.Commit(a[0], hashes[0])
	p.Commit(a[1], hashes[1])
	if n := p.Match(hashes); n != 2 {
		t.Fatalf("match %d, want 2", n)
	}
	// A second user shares the blocks.
	b := p.Acquire(hashes, 2, nil)
	if !slices.Equal(b, a[:2]) || p.RefCount(a[0]) != 2 {
		t.Fatalf("acquire %v ref %d", b, p.RefCount(a[0]))
	}
	p.Free(a)
	if p.NumFree() != 2 { // a[2] (uncached) and the 2 unused blocks minus... a[0],a[1] still held by b
		t.Fatalf("free=%d, want 2", p.NumFree())
	}
	p.Free(b)
	if p.NumFree() != 4 || p.Match(hashes) != 2 {
		t.Fatalf("free=%d match=%d: cached blocks must stay findable when free", p.NumFree(), p.Match(hashes))
	}
	// Uncached blocks are reused before cached ones.
	c, _ := p.Allocate(2, nil)
	if p.Match(hashes) != 2 {
		t.Fatalf("allocation evicted a cached block while uncached ones were free: %v", c)
	}
	// Exhaustion evicts the cached blocks, chain tail first.
	d, _ := p.Allocate(1, nil)
	if d[0] != a[1] || p.Match(hashes) != 1 {
		t.Fatalf("evicted %v (want tail block %d), match %d", d, a[1], p.Match(hashes))
	}
	p.Free(c)
	p.Free(d)
	if n := p.Reset(); n != 1 || p.Match(hashes) != 0 {
		t.Fatalf("reset dropped %d, match %d", n, p.Match(hashes))
	}
	if msg := p.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
}

func TestHashChain(t *testing.T) {
	x := AppendHashes(nil, []int32{1, 2, 3, 4}, 2)
	y := AppendHashes(nil, []int32{9, 9, 3, 4}, 2)
	if x[1] == y[1] {
		t.Fatal("equal second blocks with different parents hash equal")
	}
	z := AppendHashes(x[:1:1], []int32{1, 2, 3, 4, 5, 6}, 2)
	if z[1] != x[1] || len(z) != 3 {
		t.Fatalf("incremental hashing disagrees: %v vs %v", z, x)
	}
}

func TestCommitDuplicate(t *testing.T) {
	p := New(3, 1)
	h := HashBlock(NoHash, []int32{7})
	a, _ := p.Allocate(2, nil)
	p.Commit(a[0], h)
	p.Commit(a[1], h) // same content computed twice: first one wins
	if p.Stats().NumCached != 1 {
		t.Fatalf("cached %d, want 1", p.Stats().NumCached)
	}
	p.Free(a)
	if msg := p.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
}

// TestWindowGroupCache checks the window group's keys: distinct from the
// full group's, findable with Has, taken with AcquireOne, and NoBlock
// entries ignored by Free.
func TestWindowGroupCache(t *testing.T) {
	p := New(4, 2)
	hashes := AppendHashes(nil, []int32{1, 2, 3, 4}, 2)
	full, _ := p.Allocate(2, nil)
	win, _ := p.Allocate(2, nil)
	for i, h := range hashes {
		if WindowHash(h) == h || WindowHash(h) == NoHash {
			t.Fatalf("window hash %x of %x", WindowHash(h), h)
		}
		p.Commit(full[i], h)
		p.Commit(win[i], WindowHash(h))
	}
	if !p.Has(WindowHash(hashes[1])) || p.Has(WindowHash(WindowHash(hashes[1]))) {
		t.Fatal("Has disagrees with the committed keys")
	}
	// the window table gives its first block back: NoBlock entries are
	// skipped, the block stays cached and free
	p.Free(win[:1])
	win[0] = NoBlock
	if p.NumFree() != 1 || !p.Has(WindowHash(hashes[0])) {
		t.Fatalf("free=%d after trimming one window block", p.NumFree())
	}
	if got := p.AcquireOne(WindowHash(hashes[0])); got == NoBlock || p.NumFree() != 0 || p.RefCount(got) != 1 {
		t.Fatalf("AcquireOne of a free cached block: %d, free=%d", got, p.NumFree())
	}
	if got := p.AcquireOne(WindowHash(hashes[1])); got != win[1] || p.RefCount(got) != 2 {
		t.Fatalf("AcquireOne of a block in use: %d ref %d, want %d ref 2", got, p.RefCount(got), win[1])
	}
	if got := p.AcquireOne(12345); got != NoBlock {
		t.Fatalf("AcquireOne of an unknown hash: %d", got)
	}
	if msg := p.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
}
