package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// halfTypes are the half-width weight encodings of half.go.
var halfTypes = []kernels.DType{kernels.F16, kernels.BF16}

// TestHalfMatMul checks F16 and BF16 MatMul against the float64 product
// (checkStored: the AVX2 kernels and the plain ones) for batches of 1 to 18
// rows and more, reductions with every tail modulo 8 and across several
// slices of halfKc, and weight row counts that leave every tile tail.
func TestHalfMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 40))
	ns := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 33, 64}
	ins := []int{8, 31, 32, 64, 513, 2*halfKc + 37}
	outs := []int{1, 2, 3, 5, 7, halfNc + 2, 2*halfNc + 1}
	for _, dt := range halfTypes {
		for i, n := range ns {
			for j, in := range ins {
				out := outs[(i+j)%len(outs)]
				t.Run(fmt.Sprintf("%v/n%d/%dx%d", dt, n, out, in), func(t *testing.T) {
					data := randBlocks(r, dt, out, in)
					sanitizeHalves(dt, data)
					checkStored(t, dt, data, randF(r, n*in), n, out, in, 2)
				})
			}
		}
	}
}

// TestHalfPartition checks that an output does not depend on which range
// of weight rows a thread was given (so on the tile shape that computed
// it), on the register tiles and on the panel path (halfpanel.go), with
// and without AVX-512 (halfs.go, halfz.go):
// MatMulExperts and MatMul split the same rows differently and must agree
// bit for bit.
func TestHalfPartition(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 41))
	for _, dt := range halfTypes {
		for _, c := range []struct{ n, out, in int }{{1, 29, 64}, {1, 30, 96}, {5, 101, 520}, {2, 61, 264}, {7, 45, 1032}, {3, 23, 77}, {13, 37, 1100}, {2, 64, 2048}, {16, 50, 600}, {40, 101, 1100}, {24, 61, halfKc + 72}} {
			t.Run(fmt.Sprintf("%v/n%d/%dx%d", dt, c.n, c.out, c.in), func(t *testing.T) {
				data := randBlocks(r, dt, c.out, c.in)
				sanitizeHalves(dt, data)
				w, err := kernels.NewHostWeight(dt, c.out, c.in, data)
				if err != nil {
					t.Fatal(err)
				}
				x := &kernels.Host{R: c.n, C: c.in, F: randF(r, c.n*c.in)}
				for _, simd := range []bool{false, hasAVX512} {
					run := func(cuts ...int) []float32 {
						out := &kernels.Host{R: c.n, C: c.out, F: make([]float32, c.n*c.out)}
						q := &qmatTask{k: kern{avx2: true, simd: simd}, out: out, x: x, w: w, n: c.n}
						q.prepareHalf(1)
						lo := 0
						for _, hi := range append(cuts, c.out) {
							q.run(lo, hi, 0)
							lo = hi
						}
						return out.F
					}
					want := run()
					for _, cuts := range [][]int{{1}, {2, 3}, {1, 5, 6, 11}, {c.out / 2}, {c.out - 1}} {
						got := run(cuts...)
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("simd=%v cuts %v: [%d,%d] = %v, one range gives %v", simd, cuts, i/c.out, i%c.out, got[i], want[i])
							}
						}
					}
				}
			})
		}
	}
}

// TestHalfTileShapes calls every generated tile shape directly and
// compares it with the plain dot products, including its add to out.
func TestHalfTileShapes(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 42))
	const K, os = 72, 7
	for _, dt := range halfTypes {
		for M := 1; M <= 6; M++ {
			for W := 1; W <= 3; W++ {
				data := randBlocks(r, dt, W, K+8)
				sanitizeHalves(dt, data)
				x := randF(r, M*(K+3))
				out := randF(r, M*os)
				before := append([]float32(nil), out...)
				ok := halfTileAVX2(dt == kernels.BF16, M, W, &data[0], 2*(K+8), &x[0], K+3, K, &out[0], os)
				if !ok {
					if M*W+W+1 <= 16 {
						t.Fatalf("%v %dx%d: no tile", dt, M, W)
					}
					continue
				}
				for m := 0; m < M; m++ {
					for o := 0; o < os; o++ {
						want := float64(before[m*os+o])
						if o < W {
							want += float64(dotHalfGo(dt, data[o*2*(K+8):], x[m*(K+3):m*(K+3)+K]))
						}
						if d := math.Abs(float64(out[m*os+o]) - want); d > 1e-4*(1+math.Abs(want)) {
							t.Fatalf("%v %dx%d [%d,%d] = %v, want %v", dt, M, W, m, o, out[m*os+o], want)
						}
					}
				}
			}
		}
	}
}

// FuzzHalfMatMul checks F16/BF16 MatMul on weights made from the fuzzer's
// bytes, any batch of 1 to 40 rows, 1 to 70 weight rows and any reduction
// length up to 1200 (every tail, several K slices).
func FuzzHalfMatMul(f *testing.F) {
	f.Add(false, uint8(3), uint8(14), uint16(100), []byte{1, 2, 3})
	f.Add(true, uint8(0), uint8(2), uint16(1031), []byte{0xff, 0x7b, 0, 0x80})
	f.Add(false, uint8(17), uint8(50), uint16(7), []byte{0x00, 0x3c})
	f.Fuzz(func(t *testing.T, bf bool, n8, rows8 uint8, in16 uint16, seed []byte) {
		dt := kernels.F16
		if bf {
			dt = kernels.BF16
		}
		n, rows, in := int(n8%40)+1, int(rows8%70)+1, int(in16%1200)+1
		r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(in)))
		data := randBlocks(r, dt, rows, in)
		for i, v := range seed {
			data[i%len(data)] ^= v
		}
		sanitizeHalves(dt, data)
		checkStored(t, dt, data, randF(r, n*in), n, rows, in, 2)
	})
}

// BenchmarkHalfTileL1 times the main tile shapes on one slice of halfKc
// values, weights and activations in L1, on one thread: the kernels'
// arithmetic alone (compare GMAC/cpu-s with kernels/cpu/internal/peak's
// F32FMA).
func BenchmarkHalfTileL1(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 43))
	for _, dt := range halfTypes {
		for _, s := range [][2]int{{4, 3}, {6, 2}, {4, 2}, {5, 2}, {3, 3}} {
			M, W := s[0], s[1]
			b.Run(fmt.Sprintf("%v/%dx%d", dt, M, W), func(b *testing.B) {
				data := randBlocks(r, dt, W, halfKc)
				x := randF(r, M*halfKc)
				out := make([]float32, M*W)
				b.ResetTimer()
				c0 := processCPU()
				for i := 0; i < b.N; i++ {
					halfTileAVX2(dt == kernels.BF16, M, W, &data[0], 2*halfKc, &x[0], halfKc, halfKc, &out[0], W)
				}
				if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
					b.ReportMetric(float64(M*W*halfKc)*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
				}
			})
		}
	}
}
