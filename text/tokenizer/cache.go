package tokenizer

import (
	"hash/maphash"
	"sync"
)

const (
	cacheShards      = 64
	cacheShardCap    = 4096 // entries per shard before it is cleared
	cacheMaxKeyBytes = 128  // longer pieces are not cached
)

// pieceCache maps a pre-token to its ids. It is sharded so that concurrent
// encoders rarely contend, and bounded: a full shard is cleared.
type pieceCache struct {
	seed   maphash.Seed
	shards [cacheShards]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]int32
	_  [32]byte // keep shards on separate cache lines
}

func newPieceCache() *pieceCache {
	c := &pieceCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string][]int32)
	}
	return c
}

func (c *pieceCache) shard(key []byte) *cacheShard {
	return &c.shards[maphash.Bytes(c.seed, key)%cacheShards]
}

// get returns the cached ids of key; the caller must not modify them.
func (c *pieceCache) get(key []byte) ([]int32, bool) {
	if len(key) > cacheMaxKeyBytes {
		return nil, false
	}
	s := c.shard(key)
	s.mu.RLock()
	ids, ok := s.m[string(key)]
	s.mu.RUnlock()
	return ids, ok
}

// put stores a copy of ids under key.
func (c *pieceCache) put(key []byte, ids []int32) {
	if len(key) > cacheMaxKeyBytes {
		return
	}
	v := append([]int32(nil), ids...)
	s := c.shard(key)
	s.mu.Lock()
	if len(s.m) >= cacheShardCap {
		clear(s.m)
	}
	s.m[string(key)] = v
	s.mu.Unlock()
}
