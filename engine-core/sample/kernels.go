package sample

import (
	"math"
	"math/bits"
)

// lanes32 receives expAVX512's per-lane sums and counts (the assembly
// relies on this layout). Lanes sum in float32, so callers pass at most a
// chunk at a time (64 values a lane); lanes and chunks are then added in
// float64, which keeps sums within about 1e-7 relative.
type lanes32 struct {
	s1 [16]float32
	c1 [16]int32
}

// massCount is the result of massCount2AVX512 (the assembly relies on
// this layout).
type massCount struct {
	s1, s2 float64
	c1, c2 int64
}

// sum1 returns the float64 totals of the lanes.
func (l *lanes32) sum1() (s1 float64, c1 int) {
	for i := range 16 {
		s1 += float64(l.s1[i])
		c1 += int(l.c1[i])
	}
	return s1, c1
}

const (
	// expLo is the smallest exponent whose exp is kept: exp(-87) is still
	// a normal float32; below it a probability counts as 0 (relative to
	// the top token, which is exp(0) = 1).
	expLo = -87
	// chunk is the granularity of the draw: per-chunk sums let it skip to
	// the chunk holding its target and scan only that one.
	chunk = 1024
	// slack is the room compress needs past its count.
	slack = 16
)

// Cephes expf constants: exp(x) = 2^n * P(r), n = round(x*log2(e)),
// r = x - n*ln2 (ln2 split in two so r is exact).
const (
	log2e = 1.44269504088896341
	ln2hi = 0.693359375
	ln2lo = -2.12194440e-4
	expC5 = 1.9875691500e-4
	expC4 = 1.3981999507e-3
	expC3 = 8.3334519073e-3
	expC2 = 4.1665795894e-2
	expC1 = 1.6666665459e-1
	expC0 = 5.0000001201e-1
)

// expf returns exp(x) for expLo <= x <= 0 (relative error about 1e-7),
// the same polynomial as the assembly kernel (which rounds n to even on
// ties; either rounding keeps r within the polynomial's range).
func expf(x float32) float32 {
	n := float32(int32(x*log2e - 0.5)) // nearest (ties away from 0) for x <= 0
	r := x - n*ln2hi
	r -= n * ln2lo
	p := float32(expC5)
	p = p*r + expC4
	p = p*r + expC3
	p = p*r + expC2
	p = p*r + expC1
	p = p*r + expC0
	p = p*r + 1
	p = p*r + 1
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// rowMax returns the largest value of row ignoring NaNs (-inf when none).
func rowMax(row []float32) float32 {
	if !haveAVX512 || len(row) < 64 {
		return maxOf(row)
	}
	n := len(row) &^ 63
	var acc [16]float32
	maxAVX512(row[:n], &acc)
	m := maxOf(row[n:])
	for _, v := range acc {
		if v > m {
			m = v
		}
	}
	return m
}

// indexOf returns the first i with row[i] == v, or -1.
func indexOf(row []float32, v float32) int {
	n := 0
	if haveAVX512 {
		n = len(row) &^ 15
		if n > 0 {
			if i := indexEqAVX512(row[:n], v); i >= 0 {
				return i
			}
		}
	}
	if i := indexOfGeneric(row[n:], v); i >= 0 {
		return n + i
	}
	return -1
}

func indexOfGeneric(row []float32, v float32) int {
	for i, x := range row {
		if x == v {
			return i
		}
	}
	return -1
}

// argmax returns the index of the largest value, the lowest on ties; NaNs
// are ignored; 0 when nothing exceeds -inf. Two passes: the maximum (from
// memory), then its first position (from cache; half a row on average).
// (A single pass carrying indices measured slower: its compare-and-blend
// chain is longer than the maximum's.)
func argmax(row []float32) int32 {
	if !haveAVX512 {
		return argmaxGeneric(row)
	}
	m := rowMax(row)
	if m == negInf {
		return 0
	}
	return int32(max(indexOf(row, m), 0))
}

// expChunk writes dst[i] = exp((src[i]-m)*invT) where that exponent is at
// least lo (>= expLo), else 0 (NaN included), and returns the sum and
// number of the non-zero values. Pass at most a chunk (float32 lane sums).
func expChunk(dst, src []float32, m, invT, lo float32, l *lanes32) (float64, int) {
	n := 0
	var z float64
	var cnt int
	if haveAVX512 {
		n = len(src) &^ 15
		if n > 0 {
			expAVX512(dst[:n], src[:n], m, invT, lo, l)
			z, cnt = l.sum1()
		}
	}
	tz, tc := expChunkGeneric(dst[n:], src[n:], m, invT, lo)
	return z + tz, cnt + tc
}

func expChunkGeneric(dst, src []float32, m, invT, lo float32) (float64, int) {
	var z float64
	var cnt int
	for i, v := range src {
		x := (v - m) * invT
		if x >= lo {
			e := expf(x)
			dst[i] = e
			z += float64(e)
			cnt++
		} else {
			dst[i] = 0
		}
	}
	return z, cnt
}

// massCount2 returns the sums and counts of the elements of x >= t1 and
// of those >= t2. Sums are float32 within a lane: pass at most a chunk.
func massCount2(x []float32, t1, t2 float32, mc *massCount) (s1 float64, c1 int, s2 float64, c2 int) {
	n := 0
	if haveAVX512 {
		n = len(x) &^ 15
		if n > 0 {
			massCount2AVX512(x[:n], t1, t2, mc)
			s1, c1, s2, c2 = mc.s1, int(mc.c1), mc.s2, int(mc.c2)
		}
	}
	a, b, c, d := massCount2Generic(x[n:], t1, t2)
	return s1 + a, c1 + b, s2 + c, c2 + d
}

func massCount2Generic(x []float32, t1, t2 float32) (s1 float64, c1 int, s2 float64, c2 int) {
	for _, v := range x {
		if v >= t1 {
			s1 += float64(v)
			c1++
		}
		if v >= t2 {
			s2 += float64(v)
			c2++
		}
	}
	return s1, c1, s2, c2
}

// compress writes the elements of x with lo <= x[i] < hi to val and
// base+i to idx, in order, and returns their number. idx and val need
// room for that number plus slack.
func compress(x []float32, base int32, lo, hi float32, idx []int32, val []float32) int {
	n, k := 0, 0
	if haveAVX512 {
		n = len(x) &^ 15
		if n > 0 {
			k = compressAVX512(x[:n], base, lo, hi, &idx[0], &val[0])
		}
	}
	return k + compressGeneric(x[n:], base+int32(n), lo, hi, idx[k:], val[k:])
}

// compressGeneric is compress in plain Go (it needs one slot of slack).
// Every element is stored and the count advances by the comparison, so
// the loop has no data-dependent branch.
func compressGeneric(x []float32, base int32, lo, hi float32, idx []int32, val []float32) int {
	k := 0
	for i, v := range x {
		idx[k], val[k] = base+int32(i), v
		k += b2i(v >= lo && v < hi)
	}
	return k
}

// bandIDs writes the ids i with lo <= x[i] < hi to idx, in order, and
// returns their number; x, lo and hi must be non-negative (then float
// order is the order of the bits). idx needs room for that number plus
// slack.
func bandIDs(x []float32, lo, hi float32, idx []int32) int {
	lb := math.Float32bits(lo)
	width := math.Float32bits(hi) - lb
	n, k := 0, 0
	if haveAVX512 {
		n = len(x) &^ 15
		if n > 0 {
			k = bandIDsAVX512(x[:n], lb, width, &idx[0])
		}
	}
	return k + bandIDsGeneric(x[n:], int32(n), lb, width, idx[k:])
}

func bandIDsGeneric(x []float32, base int32, lb, width uint32, idx []int32) int {
	k := 0
	for i, v := range x {
		idx[k] = base + int32(i)
		k += b2i(math.Float32bits(v)-lb < width)
	}
	return k
}

// negInf64 is a block of -inf, copied over fully disallowed mask words.
var negInf64 = func() (b [64]float32) {
	for i := range b {
		b[i] = float32(math.Inf(-1))
	}
	return b
}()

// maskWords sets row[i] = -inf for every id i whose bit (bit i%64 of
// words[i/64]) is clear, and for the ids past the last word. It works a
// 64-bit word at a time: all-ones words cost one test.
func maskWords(row []float32, words []uint64) {
	full := min(len(words), len(row)/64)
	if haveAVX512 && full > 0 {
		maskWordsAVX512(row[:full*64], words[:full])
	} else {
		maskWordsGeneric(row[:full*64], words[:full])
	}
	for i := full * 64; i < len(row); i++ {
		if w := i >> 6; w >= len(words) || words[w]&(1<<(uint(i)&63)) == 0 {
			row[i] = negInf
		}
	}
}

// maskWordsGeneric is maskWordsAVX512 in plain Go (len(row) is
// 64*len(words)).
func maskWordsGeneric(row []float32, words []uint64) {
	for w, x := range words {
		if x == ^uint64(0) {
			continue
		}
		blk := row[w*64 : w*64+64 : w*64+64]
		if bits.OnesCount64(x) <= 16 {
			// Few allowed: keep them, fill the block, put them back.
			var keep [16]float32
			k := 0
			for y := x; y != 0; y &= y - 1 {
				keep[k] = blk[bits.TrailingZeros64(y)]
				k++
			}
			copy(blk, negInf64[:])
			k = 0
			for y := x; y != 0; y &= y - 1 {
				blk[bits.TrailingZeros64(y)] = keep[k]
				k++
			}
			continue
		}
		for z := ^x; z != 0; z &= z - 1 {
			blk[bits.TrailingZeros64(z)] = negInf
		}
	}
}
