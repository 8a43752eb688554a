package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// q8s3Loop is the signature of the three-stream Q8_0 loops.
type q8s3Loop func(w *byte, xq *int8, xd *float32, nb int, groups int, out *float32)

// q8s3Variants lists every three-stream loop q8s3_amd64.s holds (the
// served one first).
func q8s3Variants() []struct {
	name string
	f    q8s3Loop
} {
	return []struct {
		name string
		f    q8s3Loop
	}{{"rows3", dotQ8_0Rows3AVX2}}
}

// q8s3Split runs f on the rows of w as q8_0Rows1 runs the served loop:
// three thirds side by side, the rows left over through the one-row loop.
func q8s3Split(f q8s3Loop, w []byte, xq []int8, xd []float32, nb int, out []float32) {
	h := len(out) / 3
	if h > 0 {
		f(&w[0], &xq[0], &xd[0], nb, h, &out[0])
	}
	if r := len(out) - 3*h; r > 0 {
		dotQ8_0RowsPfAVX2(&w[3*h*34*nb], &xq[0], &xd[0], nb, r, &out[3*h])
	}
}

// checkQ8s3 runs q8_0Rows1 and every three-stream variant on rows Q8_0
// rows of nb blocks and checks each result bit for bit against the
// one-row loop dotQ8_0RowsPfAVX2 (which rowDot's results equal), within
// rounding of the plain-Go dot product, and that nothing is written past
// the rows.
func checkQ8s3(t *testing.T, data []byte, x []float32, nb, rows int) {
	t.Helper()
	var a actQ
	a.quantize(kern{avx2: true}, x, nb*32, 1, nb*32, 32)
	rb := 34 * nb
	want := make([]float32, rows)
	dotQ8_0RowsPfAVX2(&data[0], &a.q[0], &a.d[0], nb, rows, &want[0])
	run := func(name string, f func(out []float32)) {
		got := make([]float32, rows+1)
		got[rows] = 12345
		f(got[:rows])
		if got[rows] != 12345 {
			t.Fatalf("%s %dx%d blocks: wrote past the rows", name, rows, nb)
		}
		for o := 0; o < rows; o++ {
			if math.Float32bits(got[o]) != math.Float32bits(want[o]) {
				t.Fatalf("%s %dx%d blocks row %d = %v, the one-row loop gives %v", name, rows, nb, o, got[o], want[o])
			}
			plain := dotQ8Q8Go(a.q, a.d, data[o*rb:(o+1)*rb], nb)
			if d := math.Abs(float64(got[o] - plain)); !(d <= 1e-4*(1+math.Abs(float64(plain)))) {
				t.Fatalf("%s %dx%d blocks row %d = %v, plain Go %v", name, rows, nb, o, got[o], plain)
			}
		}
	}
	run("q8_0Rows1", func(out []float32) { q8_0Rows1(data, a.q, a.d, nb, out) })
	for _, v := range q8s3Variants() {
		run(v.name, func(out []float32) { q8s3Split(v.f, data, a.q, a.d, nb, out) })
	}
}

// TestQ8_0Rows1 checks the three-stream batch-1 Q8_0 loops for every row
// count modulo 3 (all rows left over, some, none), odd and even block
// counts, random and saturated blocks.
func TestQ8_0Rows1(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 83))
	for _, nb := range []int{1, 2, 3, 5, 8, 64, 65} {
		for _, rows := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 31, 64, 65, 97} {
			for _, sat := range []bool{false, true} {
				t.Run(fmt.Sprintf("%dx%d/sat=%v", rows, nb, sat), func(t *testing.T) {
					data := randBlocks(r, kernels.Q8_0, rows, nb*32)
					x := randF(r, nb*32)
					if sat {
						saturate(kernels.Q8_0, data)
						for i := range x {
							x[i] = float32(1 - 2*(i&1))
						}
					}
					checkQ8s3(t, data, x, nb, rows)
				})
			}
		}
	}
}

// FuzzQ8_0Rows1 checks the three-stream loops on Q8_0 weights made from
// the fuzzer's bytes (scales kept finite), 1 to 100 rows of 1 to 80 blocks.
func FuzzQ8_0Rows1(f *testing.F) {
	if !hasAVX2 {
		f.Skip("no AVX2 kernels on this machine or build")
	}
	f.Add(uint8(7), uint8(3), []byte{1, 2, 3})
	f.Add(uint8(99), uint8(64), []byte{0xff, 0x80, 0x7f})
	f.Add(uint8(2), uint8(0), []byte{0x00, 0x3c})
	f.Fuzz(func(t *testing.T, rows8, nb8 uint8, seed []byte) {
		rows, nb := int(rows8%100)+1, int(nb8%80)+1
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(rows*nb)))
		data := randBlocks(r, kernels.Q8_0, rows, nb*32)
		for i, c := range seed {
			if j := i % len(data); j%34 >= 2 {
				data[j] = c
			}
		}
		checkQ8s3(t, data, randF(r, nb*32), nb, rows)
	})
}

// BenchmarkQ8Rows3 compares the one-row Q8_0 loop dotQ8_0RowsPfAVX2 with
// the three-stream loops on one thread, alternated within each iteration
// so that all see the same load: weights in L2 (255 rows of 2048 values:
// the loops' arithmetic) and streamed from memory (streamBytes of rows in
// chunks of 256 rows, the pool's chunk for a 2048-row matrix on two
// threads). GB/cpu-s counts weight bytes per CPU-second of each loop.
func BenchmarkQ8Rows3(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	const in, chunk = 2048, 256
	r := rand.New(rand.NewPCG(17, 84))
	var a actQ
	a.quantize(kern{avx2: true}, randF(r, in), in, 1, in, 32)
	nb := in / 32
	type loop struct {
		name string
		f    func(w []byte, out []float32)
	}
	vs := []loop{{"old", func(w []byte, out []float32) {
		dotQ8_0RowsPfAVX2(&w[0], &a.q[0], &a.d[0], nb, len(out), &out[0])
	}}}
	for _, v := range q8s3Variants() {
		vs = append(vs, loop{v.name, func(w []byte, out []float32) { q8s3Split(v.f, w, a.q, a.d, nb, out) }})
	}
	rb := kernels.Q8_0.RowBytes(in)
	for _, place := range []struct {
		name string
		rows int
	}{{"L2", 255}, {"mem", streamBytes / rb &^ (chunk - 1)}} {
		b.Run(place.name, func(b *testing.B) {
			rows := place.rows
			ch := min(chunk, rows)
			data := randBlocks(r, kernels.Q8_0, rows, in)
			out := make([]float32, rows)
			cpu := make([]float64, len(vs))
			for i := 0; i < b.N; i++ {
				for j := range vs {
					v := (i + j) % len(vs)
					c0 := processCPU()
					for o := 0; o < rows; o += ch {
						vs[v].f(data[o*rb:(o+ch)*rb], out[o:o+ch])
					}
					cpu[v] += (processCPU() - c0).Seconds()
				}
			}
			for v := range vs {
				if cpu[v] > 0 {
					b.ReportMetric(float64(len(data))*float64(b.N)/cpu[v]/1e9, vs[v].name+"-GB/cpu-s")
				}
			}
		})
	}
}
