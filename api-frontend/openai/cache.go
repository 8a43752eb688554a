package openai

import (
	"container/list"
	"sync"

	"github.com/sluice-llm/sluice/ipc"
)

// maxCachedKey bounds the request text a ConstraintCache keys on; larger
// constraints are compiled every time.
const maxCachedKey = 64 << 10

// ConstraintCache memoizes compiled constraints (and compile errors) by the
// exact request text that asked for them. Applications send the same
// schema over and over; without it every request would validate and lower
// its schema again (hundreds of µs). It keeps the most recently used
// entries and is safe for concurrent use; a nil cache compiles every time.
type ConstraintCache struct {
	mu      sync.Mutex
	max     int
	entries map[string]*list.Element
	lru     *list.List // of *cacheEntry, most recent first
}

type cacheEntry struct {
	key string
	ct  ipc.Constraint
	out ToolOutput
	err error
}

// NewConstraintCache returns a cache of at most size entries.
func NewConstraintCache(size int) *ConstraintCache {
	return &ConstraintCache{max: max(size, 1), entries: map[string]*list.Element{}, lru: list.New()}
}

// get returns the entry for key, building it on a miss.
func (c *ConstraintCache) get(key string, build func() (ipc.Constraint, ToolOutput, error)) (ipc.Constraint, ToolOutput, error) {
	if c == nil || len(key) > maxCachedKey {
		return build()
	}
	c.mu.Lock()
	if el, ok := c.entries[key]; ok {
		c.lru.MoveToFront(el)
		e := el.Value.(*cacheEntry)
		c.mu.Unlock()
		return e.ct, e.out, e.err
	}
	c.mu.Unlock()
	ct, out, err := build() // outside the lock: misses compile in parallel
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok {
		c.entries[key] = c.lru.PushFront(&cacheEntry{key: key, ct: ct, out: out, err: err})
		for c.lru.Len() > c.max {
			old := c.lru.Remove(c.lru.Back()).(*cacheEntry)
			delete(c.entries, old.key)
		}
	}
	return ct, out, err
}

// Len reports how many entries the cache holds.
func (c *ConstraintCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
