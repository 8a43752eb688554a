package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/quant"
)

// storedTypes are the weight encodings MatMul computes on in place.
var storedTypes = []kernels.DType{kernels.F16, kernels.BF16, kernels.Q8_0, kernels.Q4_0, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K}

// randBlocks returns rows valid rows of dt with cols values each: random
// quant bytes and random (finite, modest) float16 scales, so that every
// bit of every field is exercised.
func randBlocks(r *rand.Rand, dt kernels.DType, rows, cols int) []byte {
	rb := dt.RowBytes(cols)
	data := make([]byte, rows*rb)
	for i := 0; i < len(data); i += 8 {
		v := r.Uint64()
		for j := i; j < min(i+8, len(data)); j++ {
			data[j] = byte(v)
			v >>= 8
		}
	}
	f16 := func(b []byte, scale float64) {
		binary.LittleEndian.PutUint16(b, quant.F32ToF16(float32(r.NormFloat64()*scale)))
	}
	switch dt {
	case kernels.F16:
		// random sign and mantissa, magnitudes in [2^-2, 1)
		for i := 0; i < len(data); i += 2 {
			h := binary.LittleEndian.Uint16(data[i:])
			binary.LittleEndian.PutUint16(data[i:], h&0x87ff|0x3400)
		}
	case kernels.BF16:
		// random sign and mantissa, magnitudes in [2^-1, 2)
		for i := 0; i < len(data); i += 2 {
			h := binary.LittleEndian.Uint16(data[i:])
			binary.LittleEndian.PutUint16(data[i:], h&0x80ff|0x3f00)
		}
	case kernels.Q8_0:
		for i := 0; i < len(data); i += 34 {
			f16(data[i:], 0.01)
		}
	case kernels.Q4_0:
		for i := 0; i < len(data); i += 18 {
			f16(data[i:], 0.1)
		}
	case kernels.Q4_K:
		for i := 0; i < len(data); i += 144 {
			f16(data[i:], 0.01)
			f16(data[i+2:], 0.01)
		}
	case kernels.Q5_K:
		for i := 0; i < len(data); i += 176 {
			f16(data[i:], 0.01)
			f16(data[i+2:], 0.01)
		}
	case kernels.Q6_K:
		for i := 0; i < len(data); i += 210 {
			f16(data[i+208:], 0.001)
		}
	}
	return data
}

// storedRef returns, for x[:n] · wᵀ, the exact product in float64 on the
// decoded weights, the same on the activations the kernel sees (quantized
// and decoded again for the block-quantized types, x itself otherwise), the
// activation-rounding bound Σ d/2·|w_j| and the magnitude Σ|w_j·x_j|.
func storedRef(w *kernels.Host, x []float32, n int) (exact, onAct, bound, mag []float64) {
	K := w.C
	q, blk := quantized(w.DT)
	xa := append([]float32(nil), x[:n*K]...)
	step := make([]float32, n*K)
	if q {
		var a actQ
		a.quantize(kern{}, x, K, n, K, blk)
		for i := range xa {
			d := a.d[i/blk]
			xa[i] = float32(a.q[i]) * d
			// the rounding of this activation: at most d/2 plus
			// |q|·(d − the unrounded scale), as ggml quantizes with
			// 1/(amax/127) and stores the scale rounded to float16
			step[i] = float32(math.Abs(float64(xa[i]) - float64(x[i])))
		}
	}
	row := make([]float32, K)
	for _, s := range []*[]float64{&exact, &onAct, &bound, &mag} {
		*s = make([]float64, n*w.R)
	}
	for o := 0; o < w.R; o++ {
		w.RowF32(row, o)
		for m := 0; m < n; m++ {
			var e, a, b, g float64
			for j, v := range row {
				e += float64(v) * float64(x[m*K+j])
				a += float64(v) * float64(xa[m*K+j])
				b += math.Abs(float64(v)) * float64(step[m*K+j])
				g += math.Abs(float64(v) * float64(x[m*K+j]))
			}
			i := m*w.R + o
			exact[i], onAct[i], bound[i], mag[i] = e, a, b, g
		}
	}
	return
}

// checkStored runs MatMul on a stored-encoding weight with every kernel
// variant and checks it against the float64 reference: equal to float32
// rounding on the activations the kernel multiplies, and within the
// activation-rounding bound of the exact product. MXFP4 runs with and
// without Options.GroupMXFP4 (the group tiles from mxgMinRows rows).
func checkStored(t *testing.T, dt kernels.DType, data []byte, x []float32, n, out, in, threads int) {
	t.Helper()
	w, err := kernels.NewHostWeight(dt, out, in, data)
	if err != nil {
		t.Fatal(err)
	}
	sExact, sOnAct, sBound, sMag := storedRef(w, x, n)
	xh := &kernels.Host{R: n, C: in, F: x}
	for _, c := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		plain, grp := c[0], c[1]
		if grp && dt != kernels.MXFP4 {
			continue
		}
		exact, onAct, bound, mag := sExact, sOnAct, sBound, sMag
		if !plain && mxgUsed(dt, n, grp) { // MXFP4 batches: the group tiles
			exact, onAct, bound, mag = mxgRef(w, x, n)
		}
		b := New(Options{Threads: threads, Plain: plain, QuantizeActivations: true, GroupMXFP4: grp})
		got := b.Alloc(n, out).(*kernels.Host)
		b.MatMul(got, xh, w, n)
		b.Close()
		for i, g := range got.F[:n*out] {
			m, o := i/out, i%out
			j := m*out + o
			tol := 2e-6*mag[j] + 1e-6
			if dt.BlockValues() == 1 {
				// F16/BF16: the plain path sums each row in two float32
				// accumulators, in/2 additions deep; the rounding bound of
				// such a sum (Higham's γ_n on the sum of |products|,
				// products rounded too) can exceed 2e-6 of it when the
				// products share a sign (fuzz input bbc2887d47d27ed4)
				tol = max(tol, float64(in/2+2)*0x1p-24*mag[j]*1.01+1e-6)
				// the panel path (halfpanel.go, BF16 batches) sums in
				// chunks of halfPanelKc, alternately into two sets: as
				// deep for long rows, up to in deep for short ones
				tol = max(tol, float64(halfPanelDepth(in))*0x1p-24*mag[j]*1.01+1e-6)
			}
			if math.Abs(float64(g)-onAct[j]) > tol {
				t.Fatalf("%v n=%d out=%d in=%d plain=%v group=%v [%d,%d]: got %v, want %v on the quantized activations (tol %g)", dt, n, out, in, plain, grp, m, o, g, onAct[j], tol)
			}
			if math.Abs(float64(g)-exact[j]) > bound[j]*1.0001+tol {
				t.Fatalf("%v n=%d out=%d in=%d plain=%v [%d,%d]: got %v, exact %v: off by more than the bound %g", dt, n, out, in, plain, m, o, g, exact[j], bound[j])
			}
		}
	}
}

func TestStoredMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 1))
	for _, dt := range storedTypes {
		blk := dt.BlockValues()
		for _, c := range []struct{ n, out, in int }{
			{1, 1, 1}, {1, 4, 1}, {1, 7, 2}, {2, 13, 3}, {1, 64, 4}, {3, 9, 1}, {4, 17, 2}, {16, 33, 1}, {1, 300, 8}, {5, 128, 3},
		} {
			in := c.in * blk
			if blk == 1 {
				in = c.in*64 + c.out%37 // odd lengths for the float types
			}
			t.Run(fmt.Sprintf("%v/%dx%dx%d", dt, c.n, c.out, in), func(t *testing.T) {
				checkStored(t, dt, randBlocks(r, dt, c.out, in), randF(r, c.n*in), c.n, c.out, in, 2)
			})
		}
	}
}

// TestStoredActivationEdges feeds activation rows that stress the
// quantizer: all zero, one huge value, values at ±127 steps.
func TestStoredActivationEdges(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 2))
	for _, dt := range storedTypes {
		in := 512
		x := make([]float32, 4*in)
		x[in+5] = 1e6
		for j := 0; j < in; j++ {
			x[2*in+j] = float32(j%7-3) * 127
			x[3*in+j] = -float32(math.Pow(2, float64(j%40-20)))
		}
		checkStored(t, dt, randBlocks(r, dt, 8, in), x, 4, 8, in, 1)
	}
}

// TestKernelTwins compares each AVX2 row kernel with its Go twin on the
// same quantized activations.
func TestKernelTwins(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 3))
	fast, plain := kern{avx2: true}, kern{}
	for _, dt := range storedTypes {
		for _, nb := range []int{1, 2, 3, 8, 32} {
			in := nb * 256
			w := randBlocks(r, dt, 1, in)
			x := randF(r, in)
			var a actQ
			if q, blk := quantized(dt); q {
				a.quantize(kern{}, x, in, 1, in, blk)
			}
			g, p := fast.rowDot(dt, w, x, &a, 0), plain.rowDot(dt, w, x, &a, 0)
			if !close32(g, p, 1e-4) {
				t.Errorf("%v nb=%d: avx2 %v, go %v", dt, nb, g, p)
			}
		}
	}
}

func TestQuantizeAct(t *testing.T) {
	for _, c := range []struct {
		name string
		x    []float32
		q    []int8
		d    float32
	}{
		{"zero", make([]float32, 32), make([]int8, 32), 0},
		{"ramp", func() []float32 {
			x := make([]float32, 32)
			for i := range x {
				x[i] = float32(i - 16)
			}
			x[31] = 127
			return x
		}(), func() []int8 {
			q := make([]int8, 32)
			for i := range q {
				q[i] = int8(i - 16)
			}
			q[31] = 127
			return q
		}(), 1},
		{"half", func() []float32 { x := make([]float32, 32); x[0], x[1], x[2] = 254, 1, 3; return x }(),
			func() []int8 { q := make([]int8, 32); q[0], q[1], q[2] = 127, 0, 2; return q }(), 2}, // 0.5 and 1.5 round to even
	} {
		q, d, bs := make([]int8, 32), make([]float32, 1), make([]int16, 2)
		quantizeActRow(c.x, q, d, bs, 32)
		if d[0] != c.d {
			t.Errorf("%s: d = %v, want %v", c.name, d[0], c.d)
		}
		var s0, s1 int16
		for i := range q {
			if q[i] != c.q[i] {
				t.Errorf("%s: q[%d] = %d, want %d", c.name, i, q[i], c.q[i])
			}
			if i < 16 {
				s0 += int16(q[i])
			} else {
				s1 += int16(q[i])
			}
		}
		if bs[0] != s0 || bs[1] != s1 {
			t.Errorf("%s: sums %v, want [%d %d]", c.name, bs, s0, s1)
		}
	}
}

// TestStoredEmbedAndWeight checks that Weight keeps the caller's bytes in
// place for every type, rejects bad sizes, and that Embed decodes rows of
// any type as the reference decoders do.
func TestStoredEmbedAndWeight(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 4))
	b := New(Options{Threads: 2})
	defer b.Close()
	for _, dt := range storedTypes {
		in := 2 * dt.BlockValues()
		if in < 64 {
			in = 64
		}
		data := randBlocks(r, dt, 5, in)
		wt, err := b.Weight(dt, 5, in, data)
		if err != nil {
			t.Fatalf("%v: %v", dt, err)
		}
		if wh := wt.(*kernels.Host); &wh.Q[0] != &data[0] || len(wh.Q) != len(data) || wh.S != nil || wh.F != nil {
			t.Errorf("%v: weight does not use the caller's bytes in place", dt)
		}
		if _, err := b.Weight(dt, 5, in, data[:len(data)-1]); err == nil {
			t.Errorf("%v: short data accepted", dt)
		}
		if dt.BlockValues() > 1 {
			if _, err := b.Weight(dt, 1, in+1, data); err == nil {
				t.Errorf("%v: cols not a multiple of the block accepted", dt)
			}
		}
		out := b.Alloc(3, in).(*kernels.Host)
		b.Embed(out, wt, []int32{4, 0, 2})
		want := make([]float32, in)
		for i, tok := range []int{4, 0, 2} {
			kernels.DequantizeRow(dt, want, data[tok*dt.RowBytes(in):])
			for j, v := range want {
				if out.F[i*in+j] != v {
					t.Fatalf("%v: embed row %d [%d] = %v, want %v", dt, tok, j, out.F[i*in+j], v)
				}
			}
		}
	}
}

// FuzzStoredMatMul checks every stored-encoding kernel family on weight
// blocks made from the fuzzer's bytes (scales included, clamped to finite
// values) against the reference.
func FuzzStoredMatMul(f *testing.F) {
	f.Add(uint8(0), uint8(1), uint8(3), []byte{1, 2, 3})
	f.Add(uint8(4), uint8(2), uint8(5), []byte{0xff, 0x7b, 0, 0x80})
	f.Add(uint8(6), uint8(3), uint8(1), []byte{0x00, 0x3c})
	f.Fuzz(func(t *testing.T, ti, n8, rows8 uint8, seed []byte) {
		dt := storedTypes[int(ti)%len(storedTypes)]
		n, rows := int(n8%5)+1, int(rows8%9)+1
		in := dt.BlockValues() * 2
		if in < 64 {
			in = 64 + int(rows8%13)
		}
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(ti)))
		data := randBlocks(r, dt, rows, in)
		for i, v := range seed {
			data[i%len(data)] ^= v
		}
		// keep float16 fields finite: clear any all-ones exponent
		sanitizeHalves(dt, data)
		checkStored(t, dt, data, randF(r, n*in), n, rows, in, 2)
	})
}

// sanitizeHalves clears the top exponent bit of every float16 field that
// encodes an infinity or NaN (the kernels need not define arithmetic on
// them), and of every bfloat16 weight of magnitude 2^20 or more.
func sanitizeHalves(dt kernels.DType, data []byte) {
	fix := func(off int) {
		if h := binary.LittleEndian.Uint16(data[off:]); h&0x7c00 == 0x7c00 {
			binary.LittleEndian.PutUint16(data[off:], h&^0x4000)
		}
	}
	switch dt {
	case kernels.F16:
		for i := 0; i < len(data); i += 2 {
			fix(i)
		}
	case kernels.BF16:
		// bfloat16 reaches float32's range: keep |w| < 2^20 so that sums
		// stay finite in float32 (above, a float32 result may overflow
		// where the float64 reference does not)
		for i := 0; i < len(data); i += 2 {
			if h := binary.LittleEndian.Uint16(data[i:]); h>>7&0xff > 127+20 {
				binary.LittleEndian.PutUint16(data[i:], h&^0x4000)
			}
		}
	case kernels.Q8_0:
		for i := 0; i < len(data); i += 34 {
			fix(i)
		}
	case kernels.Q4_0:
		for i := 0; i < len(data); i += 18 {
			fix(i)
		}
	case kernels.Q4_K, kernels.Q5_K:
		bb := dt.RowBytes(256)
		for i := 0; i < len(data); i += bb {
			fix(i)
			fix(i + 2)
		}
	case kernels.Q6_K:
		for i := 0; i < len(data); i += 210 {
			fix(i + 208)
		}
	}
}

// TestQuantizeActTwins checks that the AVX2 activation quantizer equals
// the Go one bit for bit, and that the reuse of the last quantized rows
// notices any change of the input.
func TestQuantizeActTwins(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 5))
	for _, blk := range []int{32, 256} {
		for _, k := range []int{256, 512, 2048} {
			n := 4
			x := randF(r, n*k)
			for i := 0; i < k; i++ {
				x[k+i] = 0                        // an all-zero row
				x[3*k+i] = float32(i%5-2) * 1e-39 // 127/max|x| overflows
			}
			x[2*k+7] = 1e30
			x[2*k+300%k] = -3e-39 // subnormal
			x[40] = float32(math.Inf(1))
			var fast, plain actQ
			fast.quantize(kern{avx2: hasAVX2}, x, k, n, k, blk)
			plain.quantize(kern{}, x, k, n, k, blk)
			for i := range plain.q {
				if fast.q[i] != plain.q[i] {
					t.Fatalf("blk=%d k=%d: q[%d] = %d, want %d", blk, k, i, fast.q[i], plain.q[i])
				}
			}
			for i := range plain.d {
				if fast.d[i] != plain.d[i] {
					t.Fatalf("blk=%d k=%d: d[%d] = %v, want %v", blk, k, i, fast.d[i], plain.d[i])
				}
			}
			for i := range plain.bs {
				if fast.bs[i] != plain.bs[i] {
					t.Fatalf("blk=%d k=%d: bs[%d] = %d, want %d", blk, k, i, fast.bs[i], plain.bs[i])
				}
			}
			// same input: reused; changed input: quantized again
			x[k+5] = 100
			fast.quantize(kern{avx2: hasAVX2}, x, k, n, k, blk)
			wantD := quant.F16ToF32(quant.F32ToF16(100.0 / 127)) // Q8_0: float16 scale
			if blk == 256 {
				wantD = 1 / (float32(127) / 100) // Q8_K
			}
			if fast.q[k+5] != 127 || fast.d[(k+5)/blk] != wantD {
				t.Fatalf("blk=%d k=%d: changed input not quantized again: q=%d d=%v", blk, k, fast.q[k+5], fast.d[(k+5)/blk])
			}
		}
	}
}

// TestRowLoops checks the batch-1 row-loop kernels against the single-row
// kernels: the same float32 for every row, bit for bit, over row counts
// and row lengths that include one block and odd counts.
func TestRowLoops(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 4))
	k := kern{avx2: true}
	for _, dt := range []kernels.DType{kernels.F16, kernels.BF16, kernels.Q8_0, kernels.Q4_0, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K} {
		for _, nb := range []int{1, 3, 8} {
			for _, rows := range []int{1, 2, 5, 16} {
				in := nb * 256
				data := randBlocks(r, dt, rows, in)
				w, err := kernels.NewHostWeight(dt, rows, in, data)
				if err != nil {
					t.Fatal(err)
				}
				x := &kernels.Host{R: 1, C: in, F: randF(r, in)}
				out := &kernels.Host{R: 1, C: rows, F: make([]float32, rows)}
				task := &qmatTask{k: k, out: out, x: x, w: w, n: 1}
				if q, blk := quantized(dt); q {
					task.act.quantize(k, x.F, in, 1, in, blk)
				}
				if !task.rows1(task.w, task.out, 0, rows) {
					t.Fatalf("%v: no row loop", dt)
				}
				rb := dt.RowBytes(in)
				for o := 0; o < rows; o++ {
					want := k.rowDot(dt, data[o*rb:(o+1)*rb], x.F, &task.act, 0)
					if math.Float32bits(out.F[o]) != math.Float32bits(want) {
						t.Errorf("%v nb=%d rows=%d row %d: loop %v, row kernel %v", dt, nb, rows, o, out.F[o], want)
					}
				}
			}
		}
	}
}
