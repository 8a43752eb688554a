package quant

import "encoding/binary"

// RepackQ4K writes Q4_K blocks src (a whole number of Q4KBlockBytes-byte
// blocks) to dst (same length; dst and src may be the same slice) in the
// CPU backend's batch-1 layout (kernels/cpu k4rp.go): d, dmin and the 12
// scale bytes stay; within each 64-value group of a block (32 quant bytes,
// file byte i holding value i of the group's first 32-value sub-block in
// its low nibble and value i of the second in its high nibble), repacked
// byte 4j+k holds, for k < 2, values 4j+k and 4j+k+2 of the first
// sub-block (low, high nibble), for k ≥ 2 values 4j+k−2 and 4j+k of the
// second. The bytes are as many as the file's.
//
// Each 4-byte group a0..a3 becomes lo(a0)|lo(a2)<<4, lo(a1)|lo(a3)<<4,
// hi(a0)|hi(a2)<<4, hi(a1)|hi(a3)<<4 (lo, hi: a byte's low and high
// nibble), which is its own inverse; the quants go 8 bytes (two groups)
// at a time through swapNibbles8 (repackQ4KBytes, the byte-wise
// definition, is the tests' reference).
func RepackQ4K(dst, src []byte) {
	n := len(src) / Q4KBlockBytes * Q4KBlockBytes
	_ = dst[:n]
	for o := 0; o < n; o += Q4KBlockBytes {
		s, d := (*[Q4KBlockBytes]byte)(src[o:]), (*[Q4KBlockBytes]byte)(dst[o:])
		*(*[16]byte)(d[:]) = *(*[16]byte)(s[:])
		for i := 16; i < Q4KBlockBytes; i += 8 {
			binary.LittleEndian.PutUint64(d[i:i+8], swapNibbles8(binary.LittleEndian.Uint64(s[i:i+8])))
		}
	}
}

// UnrepackQ4K undoes RepackQ4K: dst (same length as src; it may be src)
// receives the file's Q4_K blocks. The repacking is its own inverse.
func UnrepackQ4K(dst, src []byte) { RepackQ4K(dst, src) }

// swapNibbles8 is RepackQ4K's per-group transform on two little-endian
// 4-byte groups at once.
func swapNibbles8(x uint64) uint64 {
	const (
		nib  = 0x0f0f0f0f0f0f0f0f
		half = 0x0000ffff0000ffff
	)
	l, h := x&nib, x>>4&nib
	lo := l&half | (l>>16&half)<<4
	hi := h&half | (h>>16&half)<<4
	return lo | hi<<16
}

// repackQ4KBytes is RepackQ4K's byte-wise definition (the tests'
// reference).
func repackQ4KBytes(dst, src []byte) {
	var q [128]byte
	for o := 0; o+Q4KBlockBytes <= len(src); o += Q4KBlockBytes {
		copy(q[:], src[o+16:o+Q4KBlockBytes])
		copy(dst[o:o+16], src[o:o+16])
		for g := 0; g < 4; g++ {
			f := q[32*g : 32*g+32]
			d := dst[o+16+32*g : o+48+32*g]
			for j := 0; j < 8; j++ {
				a0, a1, a2, a3 := f[4*j], f[4*j+1], f[4*j+2], f[4*j+3]
				d[4*j] = a0&15 | a2<<4
				d[4*j+1] = a1&15 | a3<<4
				d[4*j+2] = a0>>4 | a2&0xf0
				d[4*j+3] = a1>>4 | a3&0xf0
			}
		}
	}
}
