package kvcache

// HashBlock returns the chained hash of one full block: a digest of the
// parent block's hash (NoHash for the first block) and the block's token
// ids. Equal prefixes give equal chains. The result is never NoHash.
func HashBlock(parent uint64, tokens []int32) uint64 {
	h := mix(parent ^ 0x9e3779b97f4a7c15)
	for _, t := range tokens {
		h = mix(h ^ uint64(uint32(t)))
	}
	h = mix(h ^ uint64(len(tokens)))
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

// mix is the splitmix64 finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
