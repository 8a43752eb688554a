package sample

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestExpf(t *testing.T) {
	for x := float32(expLo); x <= 0; x += 0.0007 {
		got, want := float64(expf(x)), math.Exp(float64(x))
		if math.Abs(got-want) > 2.5e-7*want {
			t.Fatalf("expf(%v) = %v, want %v (rel err %.2g)", x, got, want, math.Abs(got-want)/want)
		}
	}
	if expf(0) != 1 {
		t.Fatalf("expf(0) = %v, want exactly 1", expf(0))
	}
}

// kernelRow returns a row of n values drawn to stress the kernels: normal
// values, exact ties, ±0, ±inf and NaN.
func kernelRow(rng *rand.Rand, n int) []float32 {
	row := make([]float32, n)
	for i := range row {
		switch rng.IntN(20) {
		case 0:
			row[i] = float32(math.NaN())
		case 1:
			row[i] = negInf
		case 2:
			row[i] = float32(math.Copysign(0, -1))
		case 3:
			row[i] = float32(rng.IntN(3))
		default:
			row[i] = float32(rng.NormFloat64() * 3)
		}
	}
	if n > 0 && rng.IntN(10) == 0 {
		row[rng.IntN(n)] = posInf
	}
	return row
}

// checkKernels compares every kernel wrapper (assembly where the CPU has
// it) with its plain-Go reference on row.
func checkKernels(t *testing.T, row []float32, lo, hi float32) {
	t.Helper()
	if got, want := rowMax(row), maxOf(row); got != want && !(got != got && want != want) {
		t.Fatalf("rowMax = %v, want %v", got, want)
	}
	if got, want := argmax(row), argmaxGeneric(row); got != want {
		t.Fatalf("argmax = %d, want %d (row %v)", got, want, row)
	}
	for _, v := range []float32{0, 1, 2, posInf, negInf} {
		if got, want := indexOf(row, v), indexOfGeneric(row, v); got != want {
			t.Fatalf("indexOf(%v) = %d, want %d", v, got, want)
		}
	}
	// exp's contract: the exponent is at most 0 (m is the row's maximum).
	m := maxOf(row)
	if m == negInf {
		m = 0
	}
	var l lanes32
	for _, invT := range []float32{1, 1.25, 7} {
		if m == posInf {
			break
		}
		got, want := make([]float32, len(row)), make([]float32, len(row))
		var z float64
		var c int
		for a := 0; a < len(row); a += chunk {
			b := min(a+chunk, len(row))
			cz, cc := expChunk(got[a:b], row[a:b], m, invT, max(lo, expLo), &l)
			z += cz
			c += cc
		}
		wz, wc := expChunkGeneric(want, row, m, invT, max(lo, expLo))
		// exp is accurate to 2.5e-7 relative per element and the lanes sum in
		// float32 within a chunk, so allow a few ulps of float32 on the total.
		if c != wc || math.Abs(z-wz) > 2e-6*wz {
			t.Fatalf("expChunk: sum %v count %d, want %v %d", z, c, wz, wc)
		}
		for i := range got {
			if (got[i] == 0) != (want[i] == 0) || math.Abs(float64(got[i]-want[i])) > 4e-7*float64(want[i]) {
				t.Fatalf("exp of %v: %v, want %v", row[i], got[i], want[i])
			}
			if want[i] != 0 {
				x := float64((row[i] - m) * invT)
				if ref := math.Exp(x); math.Abs(float64(got[i])-ref) > 3e-7*ref {
					t.Fatalf("exp(%v) = %v, want %v", x, got[i], ref)
				}
			}
		}
		var mc massCount
		s1, c1, s2, c2 := massCount2(got[:min(len(got), chunk)], lo, hi, &mc)
		w1, d1, w2, d2 := massCount2Generic(got[:min(len(got), chunk)], lo, hi)
		if c1 != d1 || c2 != d2 || math.Abs(s1-w1) > 1e-6*w1 || math.Abs(s2-w2) > 1e-6*w2 {
			t.Fatalf("massCount2(%v, %v) = %v %d %v %d, want %v %d %v %d", lo, hi, s1, c1, s2, c2, w1, d1, w2, d2)
		}
		// bandIDs on the (non-negative) exps, for a positive band.
		blo, bhi := float32(math.Abs(float64(lo))), float32(math.Abs(float64(hi)))
		if blo == blo && bhi == bhi && blo <= bhi {
			ids := make([]int32, len(got)+slack)
			n := bandIDs(got, blo, bhi, ids)
			var want []int32
			for i, v := range got {
				if v >= blo && v < bhi {
					want = append(want, int32(i))
				}
			}
			if !slices.Equal(ids[:n], want) {
				t.Fatalf("bandIDs [%v, %v): %v, want %v", blo, bhi, ids[:n], want)
			}
		}
	}
	idx, val := make([]int32, len(row)+slack), make([]float32, len(row)+slack)
	widx, wval := make([]int32, len(row)+1), make([]float32, len(row)+1)
	n := compress(row, 7, lo, hi, idx, val)
	wn := compressGeneric(row, 7, lo, hi, widx, wval)
	if n != wn || !slices.Equal(idx[:n], widx[:n]) || !slices.Equal(val[:n], wval[:n]) {
		t.Fatalf("compress [%v, %v): %d %v, want %d %v", lo, hi, n, idx[:n], wn, widx[:wn])
	}
}

func TestKernelsMatchGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for trial := range 300 {
		n := rng.IntN(300)
		if trial%10 == 0 {
			n = 32000 + rng.IntN(20)
		}
		row := kernelRow(rng, n)
		lo := float32(rng.NormFloat64() * 2)
		checkKernels(t, row, lo, lo+float32(rng.ExpFloat64()*3))
	}
}

func FuzzKernels(f *testing.F) {
	seed := make([]byte, 4*70)
	for i := range 70 {
		binary.LittleEndian.PutUint32(seed[4*i:], math.Float32bits(float32(i%9)-3))
	}
	f.Add(seed, float32(-1), float32(2))
	f.Add([]byte{0, 0, 0x80, 0x7f, 0, 0, 0xc0, 0x7f}, float32(0), float32(1))
	f.Fuzz(func(t *testing.T, data []byte, lo, hi float32) {
		row := make([]float32, len(data)/4)
		for i := range row {
			row[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		checkKernels(t, row, lo, hi)
		// The same bytes as a bitset over the row (a shorter one when
		// the row's length is odd).
		words := make([]uint64, len(data)/8)
		for i := range words {
			words[i] = binary.LittleEndian.Uint64(data[8*i:])
		}
		if len(row)%2 == 1 && len(words) > 0 {
			words = words[:len(words)-1]
		}
		checkMaskWords(t, row, words)
	})
}

func TestSortCoarse(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	var k [2][sampleSize]uint16
	for trial := range 100 {
		q := make([]float32, 1+rng.IntN(sampleSize))
		for i := range q {
			q[i] = float32(math.Exp(-rng.ExpFloat64() * 10))
			if i%7 == 0 {
				q[i] = 0
			}
		}
		want := make([]float32, len(q))
		for i, v := range q {
			want[i] = math.Float32frombits(math.Float32bits(v) &^ 0xffff)
		}
		slices.Sort(want)
		sortCoarse(q, &k)
		if !slices.Equal(q, want) {
			t.Fatalf("trial %d: %v, want %v", trial, q, want)
		}
	}
}

// TestMaskWords checks maskWords (assembly where the CPU has it) and its
// plain-Go word loop against the per-id rule, bit for bit, over rows
// whose lengths are and are not multiples of 64, bitsets shorter than the
// row, and words of every density (all-ones, zero, a few bits, most bits).
func TestMaskWords(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	randWord := func() uint64 {
		switch rng.IntN(5) {
		case 0:
			return ^uint64(0)
		case 1:
			return 0
		case 2: // a few bits
			var w uint64
			for range 1 + rng.IntN(16) {
				w |= 1 << rng.IntN(64)
			}
			return w
		case 3: // most bits
			w := ^uint64(0)
			for range 1 + rng.IntN(8) {
				w &^= 1 << rng.IntN(64)
			}
			return w
		}
		return rng.Uint64()
	}
	for _, n := range []int{0, 1, 63, 64, 65, 128, 200, 512, 1000, 32000} {
		for trial := range 20 {
			row := kernelRow(rng, n)
			nw := (n + 63) / 64
			if trial%5 == 4 && nw > 0 {
				nw = rng.IntN(nw) // shorter bitset: ids past it are disallowed
			}
			words := make([]uint64, nw)
			for i := range words {
				words[i] = randWord()
			}
			checkMaskWords(t, row, words)
		}
	}
}

// checkMaskWords compares maskWords and maskWordsGeneric with the per-id
// rule, bit for bit.
func checkMaskWords(t *testing.T, row []float32, words []uint64) {
	t.Helper()
	n := len(row)
	want := slices.Clone(row)
	for i := range want {
		if w := i >> 6; w >= len(words) || words[w]&(1<<(uint(i)&63)) == 0 {
			want[i] = negInf
		}
	}
	got := slices.Clone(row)
	maskWords(got, words)
	gen := slices.Clone(row)
	full := min(len(words), n/64)
	maskWordsGeneric(gen[:full*64], words[:full])
	copy(gen[full*64:], want[full*64:])
	for i := range want {
		wb := math.Float32bits(want[i])
		if math.Float32bits(got[i]) != wb || math.Float32bits(gen[i]) != wb {
			t.Fatalf("n=%d id %d: maskWords %v, generic %v, want %v", n, i, got[i], gen[i], want[i])
		}
	}
}
