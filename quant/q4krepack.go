package quant

// RepackQ4K writes Q4_K blocks src (a whole number of Q4KBlockBytes-byte
// blocks) to dst (same length; dst and src may be the same slice) in the
// CPU backend's batch-1 layout (kernels/cpu k4rp.go): d, dmin and the 12
// scale bytes stay; within each 64-value group of a block (32 quant bytes,
// file byte i holding value i of the group's first 32-value sub-block in
// its low nibble and value i of the second in its high nibble), repacked
// byte 4j+k holds, for k < 2, values 4j+k and 4j+k+2 of the first
// sub-block (low, high nibble), for k ≥ 2 values 4j+k−2 and 4j+k of the
// second. The bytes are as many as the file's.
func RepackQ4K(dst, src []byte) {
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

// UnrepackQ4K undoes RepackQ4K: dst (same length as src; it may be src)
// receives the file's Q4_K blocks.
func UnrepackQ4K(dst, src []byte) {
	var q [128]byte
	for o := 0; o+Q4KBlockBytes <= len(src); o += Q4KBlockBytes {
		copy(q[:], src[o+16:o+Q4KBlockBytes])
		copy(dst[o:o+16], src[o:o+16])
		for g := 0; g < 4; g++ {
			r := q[32*g : 32*g+32]
			d := dst[o+16+32*g : o+48+32*g]
			for j := 0; j < 8; j++ {
				b0, b1, b2, b3 := r[4*j], r[4*j+1], r[4*j+2], r[4*j+3]
				d[4*j] = b0&15 | b2<<4
				d[4*j+1] = b1&15 | b3<<4
				d[4*j+2] = b0>>4 | b2&0xf0
				d[4*j+3] = b1>>4 | b3&0xf0
			}
		}
	}
}
