package cpu

import (
	"bufio"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/quant"
)

// ggmlQ8_0 is a scalar transcription, written from the format's
// definition, of how ggml quantizes an activation block of 32 for Q8_0 and
// Q4_0 dot products (quantize_row_q8_0 on x86 with AVX2): amax = max|x|,
// the stored scale is float16(amax/127), and q = round-half-even(x·id)
// with id = 127/amax (0 when amax is 0). It returns q and the scale's
// float16 bits.
func ggmlQ8_0(x []float32) ([]int8, uint16) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	d := amax / 127
	var id float32
	if amax != 0 {
		id = 127 / amax
	}
	q := make([]int8, len(x))
	for j, v := range x {
		q[j] = int8(math.RoundToEven(float64(v * id)))
	}
	return q, quant.F32ToF16(d)
}

// ggmlQ8K is a scalar transcription, written from the format's definition,
// of ggml's quantize_row_q8_K for one block of 256: m is the first value
// of largest magnitude (with its sign), iscale = −127/m, q =
// min(127, nearest(iscale·x)) with nearest rounding half to even (ggml adds
// 1.5·2²³ and reads the mantissa), the scale is 1/iscale (float32) and
// bsums holds the sum of every 16 q. An all-zero block has scale 0.
func ggmlQ8K(x []float32) ([]int8, float32, []int16) {
	var m, amax float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, m = a, v
		}
	}
	q := make([]int8, len(x))
	bs := make([]int16, len(x)/16)
	if amax == 0 {
		return q, 0, bs
	}
	iscale := -127 / m
	for j, v := range x {
		// 1.5·2²³: the sum's low mantissa bits are the rounded integer. The
		// product is rounded on its own, as in ggml's quantize_row_q8_K_ref
		// (ggml-quants.c, built into ggml-base without -march: no FMA to
		// contract into); the explicit conversion keeps the Go compiler from
		// fusing the multiply-add at GOAMD64=v3 (Go spec), which rounded
		// tiny-normal's −63.5 tie to −63 instead of −64
		f := float32(iscale*v) + 12582912
		n := int32(math.Float32bits(f)&0x007fffff) - 0x00400000
		q[j] = int8(min(127, n))
	}
	for g := range bs {
		for _, v := range q[g*16 : (g+1)*16] {
			bs[g] += int16(v)
		}
	}
	return q, 1 / iscale, bs
}

// checkAgainstGGML quantizes x with both quantizer twins and compares with
// ggml's blocks: Q8_0 blocks must be equal (q and the float16 scale); Q8_K
// blocks equal up to the sign ggml gives them (q, scale and sums all
// negated when the value of largest magnitude is positive), so that every
// product is the same. Where ggml's scale is 0 every product is 0 and
// only the scale is compared.
func checkAgainstGGML(t *testing.T, name string, x []float32, q80 [][]int8, d80 []uint16, q8k [][]int8, d8k []float32, bs8k [][]int16) {
	t.Helper()
	n := len(x)
	for _, k := range []kern{{}, {avx2: hasAVX2}} {
		var a actQ
		a.quantize(k, x, n, 1, n, 32)
		for b := range d80 {
			want := quant.F16ToF32(d80[b])
			if a.d[b] != want {
				t.Fatalf("%s avx2=%v Q8_0 block %d: scale %v, ggml %v", name, k.avx2, b, a.d[b], want)
			}
			if want == 0 {
				continue
			}
			for j, v := range q80[b] {
				if got := a.q[b*32+j]; got != v {
					t.Fatalf("%s avx2=%v Q8_0 block %d [%d] (x=%v): q %d, ggml %d", name, k.avx2, b, j, x[b*32+j], got, v)
				}
			}
		}
		if len(d8k) == 0 {
			continue
		}
		a.quantize(k, x, n, 1, n, 256)
		for b, dg := range d8k {
			sign := int8(1)
			if dg < 0 {
				sign = -1
			}
			if want := float32(sign) * dg; a.d[b] != want {
				t.Fatalf("%s avx2=%v Q8_K block %d: scale %v, ggml %v", name, k.avx2, b, a.d[b], dg)
			}
			if dg == 0 {
				continue
			}
			for j, v := range q8k[b] {
				if got := a.q[b*256+j]; got != sign*v {
					t.Fatalf("%s avx2=%v Q8_K block %d [%d] (x=%v): q %d, ggml %d (sign %d)", name, k.avx2, b, j, x[b*256+j], got, v, sign)
				}
			}
			for g, v := range bs8k[b] {
				if got := a.bs[b*16+g]; got != int16(sign)*v {
					t.Fatalf("%s avx2=%v Q8_K block %d sum %d: %d, ggml %d", name, k.avx2, b, g, got, v)
				}
			}
		}
	}
}

// TestQuantizeActGGMLGolden checks both quantizer twins against blocks
// that ggml's own quantize_row_q8_0 and quantize_row_q8_K produced
// (testdata/ggml_quantize.golden: normal values at two scales, outliers,
// exact .5 ties, largest magnitudes of either sign, zero, large and sparse
// blocks).
func TestQuantizeActGGMLGolden(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "ggml_quantize.golden"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var name string
	var x []float32
	var q80 [][]int8
	var d80 []uint16
	cases := 0
	ints := func(s string) []int64 {
		var out []int64
		for _, f := range strings.Split(s, ",") {
			v, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out = append(out, v)
		}
		return out
	}
	hex := func(s string, bits int) uint64 {
		v, err := strconv.ParseUint(s, 16, bits)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return v
	}
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		fs := strings.Fields(line)
		switch fs[0] {
		case "case":
			name, x, q80, d80 = fs[1], nil, nil, nil
		case "x":
			for _, h := range fs[1:] {
				x = append(x, math.Float32frombits(uint32(hex(h, 32))))
			}
		case "q8_0":
			for _, blk := range fs[1:] {
				p := strings.Split(blk, ":")
				d80 = append(d80, uint16(hex(p[0], 16)))
				var q []int8
				for _, v := range ints(p[1]) {
					q = append(q, int8(v))
				}
				q80 = append(q80, q)
			}
			if len(x)%256 != 0 {
				checkAgainstGGML(t, name, x, q80, d80, nil, nil, nil)
				cases++
			}
		case "q8_k":
			var q8k [][]int8
			var d8k []float32
			var bs8k [][]int16
			for _, blk := range fs[1:] {
				p := strings.Split(blk, ":")
				d8k = append(d8k, math.Float32frombits(uint32(hex(p[0], 32))))
				var q []int8
				for _, v := range ints(p[1]) {
					q = append(q, int8(v))
				}
				var bs []int16
				for _, v := range ints(p[2]) {
					bs = append(bs, int16(v))
				}
				q8k, bs8k = append(q8k, q), append(bs8k, bs)
			}
			checkAgainstGGML(t, name, x, q80, d80, q8k, d8k, bs8k)
			cases++
		default:
			t.Fatalf("bad golden line %q", line[:min(len(line), 40)])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cases < 9 {
		t.Fatalf("read %d golden cases, want 9", cases)
	}
}

// TestQuantizeActTranscription checks both quantizer twins against the
// scalar transcriptions of ggml's quantizers on a table of blocks and on
// random ones at many scales.
func TestQuantizeActTranscription(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 7))
	block := func(f func(i int) float32) []float32 {
		x := make([]float32, 256)
		for i := range x {
			x[i] = f(i)
		}
		return x
	}
	table := []struct {
		name string
		x    []float32
	}{
		{"ramp", block(func(i int) float32 { return float32(i - 128) })},
		{"halves", block(func(i int) float32 {
			if i%32 == 0 {
				return 127
			}
			return float32(i%32-16) + 0.5
		})},
		{"negative-max-first", block(func(i int) float32 {
			switch i {
			case 9:
				return -2
			case 99:
				return 2
			}
			return float32(i%7) / 7
		})},
		{"positive-max-first", block(func(i int) float32 {
			switch i {
			case 9:
				return 2
			case 99:
				return -2
			}
			return -float32(i%7) / 7
		})},
		{"zero", make([]float32, 256)},
		{"one-value", block(func(i int) float32 {
			if i == 200 {
				return -0.25
			}
			return 0
		})},
		{"tiny-normal", block(func(i int) float32 { return float32(i%9-4) * 1e-30 })},
	}
	for s := 0; s < 40; s++ {
		scale := float32(math.Pow(10, float64(r.IntN(16)-8)))
		table = append(table, struct {
			name string
			x    []float32
		}{"random-" + strconv.Itoa(s), block(func(int) float32 { return float32(r.NormFloat64()) * scale })})
	}
	for _, c := range table {
		var q80 [][]int8
		var d80 []uint16
		for b := 0; b < 8; b++ {
			q, d := ggmlQ8_0(c.x[b*32 : (b+1)*32])
			q80, d80 = append(q80, q), append(d80, d)
		}
		q, d, bs := ggmlQ8K(c.x)
		checkAgainstGGML(t, c.name, c.x, q80, d80, [][]int8{q}, []float32{d}, [][]int16{bs})
	}
}
