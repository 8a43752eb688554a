package kvcache

import "github.com/sluice-llm/sluice/engine-core/internal/splitmix"

// HashBlock returns the chained hash of one full block: a digest of the
// parent block's hash (NoHash for the first block) and the block's token
// ids. Equal prefixes give equal chains. The result is never NoHash.
func HashBlock(parent uint64, tokens []int32) uint64 {
	h := splitmix.Mix(parent ^ splitmix.Golden)
	for _, t := range tokens {
		h = splitmix.Mix(h ^ uint64(uint32(t)))
	}
	h = splitmix.Mix(h ^ uint64(len(tokens)))
	if h == NoHash {
		h = 1
	}
	return h
}

// AppendHashes appends to dst the hashes of the full blocks of tokens that
// follow the len(dst) blocks already hashed, and returns dst.
func AppendHashes(dst []uint64, tokens []int32, blockSize int) []uint64 {
	parent := NoHash
	if len(dst) > 0 {
		parent = dst[len(dst)-1]
	}
	for k := len(dst); (k+1)*blockSize <= len(tokens); k++ {
		parent = HashBlock(parent, tokens[k*blockSize:(k+1)*blockSize])
		dst = append(dst, parent)
	}
	return dst
}

// windowSalt separates the sliding-window group's cache keys from the full
// group's (both groups' blocks share one pool and one hash map).
const windowSalt uint64 = 0x77696e646f772d6b // "window-k"

// WindowHash is the prefix-cache key of the sliding-window group's block
// whose full-attention counterpart has hash h: the same token prefix, the
// window layers' keys and values. The result is never NoHash (for h ≠
// NoHash).
func WindowHash(h uint64) uint64 {
	w := splitmix.Mix(h ^ windowSalt)
	if w == NoHash {
		w = 1
	}
	return w
}
