package cpu

// Load-time repack of Q4_K weights for the batch-1 row loop
// (k4rp_amd64.s): the quants of every 64-value group of a block are
// reordered so that one VPMADDUBSW of the low nibbles covers pairs of both
// 32-value sub-blocks (first sub-block in even words, second in odd) and
// the high nibbles the other pairs; the loop adds the two as words and
// applies both sub-block scales with one VPMADDWD. d, dmin and the 12
// scale bytes stay where the file has them; a repacked block has the
// file's 144 bytes. The activations are permuted the same way (once per
// step, permuteQ4KAct); each 32-bit lane of the loop's integer sums then
// holds exactly the products it holds in the file's layout, so results
// are bit-identical.

// q4kRepackByte returns the position, in the file's 32 quant bytes of a
// 64-value group, of the value that repacked byte i holds in its low
// nibble, and whether that value is in the high nibble there: repacked
// byte 4j+k (k < 2) holds first-sub-block value 4j+k (file byte 4j+k, low
// nibble) and 4j+k+2 (high nibble of the repacked byte); k ≥ 2 holds the
// second sub-block's values 4j+k−2 and 4j+k (file bytes, high nibbles).
func q4kRepackSrc(i int) (src int, high bool) {
	j, k := i/4, i%4
	if k < 2 {
		return 4*j + k, false
	}
	return 4*j + k - 2, true
}

// repackQ4K writes the repacked form of the Q4_K blocks src (a whole
// number of 144-byte blocks) to dst (same length; dst and src may be the
// same slice).
func repackQ4K(dst, src []byte) {
	var q [128]byte
	for o := 0; o+144 <= len(src); o += 144 {
		copy(q[:], src[o+16:o+144])
		copy(dst[o:o+16], src[o:o+16])
		for g := 0; g < 4; g++ {
			f := q[32*g : 32*g+32]
			d := dst[o+16+32*g : o+48+32*g]
			for i := range d {
				s, high := q4kRepackSrc(i)
				lo, hi := f[s]&15, f[s+2]&15
				if high {
					lo, hi = f[s]>>4, f[s+2]>>4
				}
				d[i] = lo | hi<<4
			}
		}
	}
}

// unrepackQ4K undoes repackQ4K (dst and src may be the same slice).
func unrepackQ4K(dst, src []byte) {
	var q [128]byte
	for o := 0; o+144 <= len(src); o += 144 {
		copy(q[:], src[o+16:o+144])
		copy(dst[o:o+16], src[o:o+16])
		for g := 0; g < 4; g++ {
			r := q[32*g : 32*g+32]
			d := dst[o+16+32*g : o+48+32*g]
			for i := range r {
				s, high := q4kRepackSrc(i)
				lo, hi := r[i]&15, r[i]>>4
				if high {
					d[s] = d[s]&15 | lo<<4
					d[s+2] = d[s+2]&15 | hi<<4
				} else {
					d[s] = d[s]&0xf0 | lo
					d[s+2] = d[s+2]&0xf0 | hi
				}
			}
		}
	}
}

// permuteQ4KAct writes the Q8_K activation values src (a multiple of 64)
// to dst in the repacked loop's order: per 64 values, 32 in low-nibble
// order (values 4j, 4j+1, 32+4j, 33+4j for j < 8) then 32 in high-nibble
// order (4j+2, 4j+3, 34+4j, 35+4j).
func permuteQ4KAct(dst, src []int8) {
	for o := 0; o+64 <= len(src); o += 64 {
		s, d := src[o:o+64], dst[o:o+64]
		for j := 0; j < 8; j++ {
			d[4*j], d[4*j+1], d[4*j+2], d[4*j+3] = s[4*j], s[4*j+1], s[32+4*j], s[33+4*j]
			d[32+4*j], d[33+4*j], d[34+4*j], d[35+4*j] = s[4*j+2], s[4*j+3], s[34+4*j], s[35+4*j]
		}
	}
}

// q4kRows1R is q4kRows1 on repacked weights (repackQ4K) and permuted
// activations (permuteQ4KAct): out[i] = activation row times weight row i.
// An odd last row is unrepacked into tmp (144·nb bytes) and runs through
// the one-row loop on the unpermuted activations raw. Results equal
// q4kRows1's on the file's rows bit for bit. Needs AVX2.
func q4kRows1R(w []byte, qp, raw []int8, d []float32, bs []int16, nb int, out []float32, tmp []byte) {
	rows := len(out)
	if rows == 0 || nb == 0 {
		return
	}
	rb := nb * 144
	_, _, _, _, _ = w[rows*rb-1], qp[nb*256-1], raw[nb*256-1], d[nb-1], bs[nb*16-1]
	if h := rows / 2; h > 0 {
		dotQ4KRows2RAVX2(&w[0], &qp[0], &d[0], &bs[0], nb, h, &out[0])
	}
	if rows&1 != 0 {
		t := tmp[:rb]
		unrepackQ4K(t, w[(rows-1)*rb:rows*rb])
		dotQ4KRowsAVX2(&t[0], &raw[0], &d[0], &bs[0], nb, 1, &out[rows-1])
	}
}
