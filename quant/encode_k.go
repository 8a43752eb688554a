package quant

import (
	"encoding/binary"
	"math"
)

// Simple encoders for Q4_0 and the k-quants. They write valid blocks that
// the decoders (and ggml) read back; they pick scales by min/max (or
// absolute max) per sub-block instead of ggml's error-minimising search,
// so they are for generating test and benchmark weights, not for
// quantizing real checkpoints (use llama.cpp's llama-quantize for those).

// nearestInt rounds half away from zero.
func nearestInt(x float32) int { return int(math.Round(float64(x))) }

func clampInt(x, lo, hi int) int { return max(lo, min(hi, x)) }

// AppendQ4_0 appends xs (a multiple of 32 values) encoded as ggml Q4_0
// blocks, as ggml's quantize_row_q4_0_ref: d = max/-8 for the value of
// largest magnitude, nibbles (x/d + 8.5) truncated and capped at 15.
func AppendQ4_0(dst []byte, xs []float32) []byte {
	for b := 0; b+Q8_0Block <= len(xs); b += Q8_0Block {
		blk := xs[b : b+Q8_0Block]
		var amax, mx float32
		for _, v := range blk {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, mx = a, v
			}
		}
		d := mx / -8
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		dst = binary.LittleEndian.AppendUint16(dst, F32ToF16(d))
		for j := 0; j < 16; j++ {
			q0 := min(15, int(int8(blk[j]*id+8.5)))
			q1 := min(15, int(int8(blk[j+16]*id+8.5)))
			dst = append(dst, byte(q0)|byte(q1)<<4)
		}
	}
	return dst
}

// kScalesMins quantizes 8 sub-block scales and mins (all ≥ 0) to 6 bits
// against super-block factors d and dmin, and packs them into the 12 bytes
// of Q4_K/Q5_K (the inverse of scaleMinK4). It returns d and dmin as
// stored (float16-rounded) and the 6-bit values.
func kScalesMins(scales, mins *[8]float32, packed []byte) (d, dmin float32, ls, lm [8]int) {
	var maxS, maxM float32
	for j := range 8 {
		maxS = max(maxS, scales[j])
		maxM = max(maxM, mins[j])
	}
	d = F16ToF32(F32ToF16(maxS / 63))
	dmin = F16ToF32(F32ToF16(maxM / 63))
	for j := range 8 {
		if d > 0 {
			ls[j] = clampInt(nearestInt(scales[j]/d), 0, 63)
		}
		if dmin > 0 {
			lm[j] = clampInt(nearestInt(mins[j]/dmin), 0, 63)
		}
	}
	clear(packed[:12])
	for j := range 8 {
		if j < 4 {
			packed[j] = byte(ls[j])
			packed[j+4] = byte(lm[j])
		} else {
			packed[j+4] = byte(ls[j]&0xf) | byte(lm[j]&0xf)<<4
			packed[j-4] |= byte(ls[j]>>4) << 6
			packed[j] |= byte(lm[j]>>4) << 6
		}
	}
	return d, dmin, ls, lm
}

// affineK quantizes one 256-value super-block as value = d·sc·q − dmin·m
// with q in [0, qmax], returning the 12 packed scale bytes, d, dmin and the
// 256 quantized values.
func affineK(x []float32, qmax int, packed []byte, L *[QKBlock]int) (d, dmin float32) {
	var scales, mins [8]float32
	for j := range 8 {
		sub := x[32*j : 32*j+32]
		lo, hi := sub[0], sub[0]
		for _, v := range sub {
			lo, hi = min(lo, v), max(hi, v)
		}
		lo = min(lo, 0) // ggml keeps the min ≤ 0 (m ≥ 0)
		scales[j] = (hi - lo) / float32(qmax)
		mins[j] = -lo
	}
	d, dmin, ls, lm := kScalesMins(&scales, &mins, packed)
	for j := range 8 {
		sc, m := d*float32(ls[j]), dmin*float32(lm[j])
		for i := 32 * j; i < 32*j+32; i++ {
			q := 0
			if sc > 0 {
				q = clampInt(nearestInt((x[i]+m)/sc), 0, qmax)
			}
			L[i] = q
		}
	}
	return d, dmin
}

// AppendQ4K appends xs (a multiple of 256 values) encoded as ggml Q4_K
// super-blocks: per 32-value sub-block a 6-bit scale and min, 4-bit values.
func AppendQ4K(dst []byte, xs []float32) []byte {
	var L [QKBlock]int
	for b := 0; b+QKBlock <= len(xs); b += QKBlock {
		var blk [Q4KBlockBytes]byte
		d, dmin := affineK(xs[b:b+QKBlock], 15, blk[4:16], &L)
		binary.LittleEndian.PutUint16(blk[0:], F32ToF16(d))
		binary.LittleEndian.PutUint16(blk[2:], F32ToF16(dmin))
		q := blk[16:]
		for j := 0; j < QKBlock; j += 64 {
			for l := range 32 {
				q[l] = byte(L[j+l]) | byte(L[j+l+32])<<4
			}
			q = q[32:]
		}
		dst = append(dst, blk[:]...)
	}
	return dst
}

// AppendQ5K appends xs (a multiple of 256 values) encoded as ggml Q5_K
// super-blocks: Q4_K's scales with 5-bit values (the fifth bit in qh).
func AppendQ5K(dst []byte, xs []float32) []byte {
	var L [QKBlock]int
	for b := 0; b+QKBlock <= len(xs); b += QKBlock {
		var blk [Q5KBlockBytes]byte
		d, dmin := affineK(xs[b:b+QKBlock], 31, blk[4:16], &L)
		binary.LittleEndian.PutUint16(blk[0:], F32ToF16(d))
		binary.LittleEndian.PutUint16(blk[2:], F32ToF16(dmin))
		qh, ql := blk[16:48], blk[48:]
		m1, m2 := byte(1), byte(2)
		for n := 0; n < QKBlock; n += 64 {
			for j := range 32 {
				l1, l2 := L[n+j], L[n+j+32]
				if l1 > 15 {
					l1 -= 16
					qh[j] |= m1
				}
				if l2 > 15 {
					l2 -= 16
					qh[j] |= m2
				}
				ql[j] = byte(l1) | byte(l2)<<4
			}
			m1, m2 = m1<<2, m2<<2
			ql = ql[32:]
		}
		dst = append(dst, blk[:]...)
	}
	return dst
}

// AppendQ6K appends xs (a multiple of 256 values) encoded as ggml Q6_K
// super-blocks: per 16-value sub-block an int8 scale (times a float16
// super-scale), values in [-32, 31].
func AppendQ6K(dst []byte, xs []float32) []byte {
	var L [QKBlock]int
	for b := 0; b+QKBlock <= len(xs); b += QKBlock {
		x := xs[b : b+QKBlock]
		var blk [Q6KBlockBytes]byte
		var scales [16]float32
		var maxS float32
		for j := range 16 {
			var amax float32
			for _, v := range x[16*j : 16*j+16] {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			scales[j] = amax / 31
			maxS = max(maxS, scales[j])
		}
		d := F16ToF32(F32ToF16(maxS / 127))
		sc := blk[192:208]
		for j := range 16 {
			is := 0
			if d > 0 {
				is = clampInt(nearestInt(scales[j]/d), -128, 127)
			}
			sc[j] = byte(int8(is))
			s := d * float32(is)
			for i := 16 * j; i < 16*j+16; i++ {
				q := 0
				if s != 0 {
					q = clampInt(nearestInt(x[i]/s), -32, 31)
				}
				L[i] = q + 32
			}
		}
		binary.LittleEndian.PutUint16(blk[208:], F32ToF16(d))
		ql, qh := blk[:128], blk[128:192]
		for j := 0; j < QKBlock; j += 128 {
			for l := range 32 {
				q1, q2, q3, q4 := L[j+l], L[j+l+32], L[j+l+64], L[j+l+96]
				ql[l] = byte(q1&0xf) | byte(q3&0xf)<<4
				ql[l+32] = byte(q2&0xf) | byte(q4&0xf)<<4
				qh[l] = byte(q1>>4) | byte(q2>>4)<<2 | byte(q3>>4)<<4 | byte(q4>>4)<<6
			}
			ql, qh = ql[64:], qh[32:]
		}
		dst = append(dst, blk[:]...)
	}
	return dst
}
