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

// halfSmallRef is the order halfSmall tiles sum in (halfs.go), in Go: lane
// j of 16 adds the products of k ≡ j mod 16 one fused multiply-add after
// another, then (l_j + l_{j+8}), 4, 2 and 1 lanes apart. (The float32
// FMA is float32(math.FMA(…)) in float64: a product of two float32 is
// exact in float64, and the sum's double rounding never met a float32 tie
// in these tests.)
func halfSmallRef(dt kernels.DType, w []byte, x []float32) float32 {
	conv := quant.F16ToF32
	if dt == kernels.BF16 {
		conv = quant.BF16ToF32
	}
	var l [16]float32
	for k, xv := range x {
		wv := conv(binary.LittleEndian.Uint16(w[2*k:]))
		l[k%16] = float32(math.FMA(float64(wv), float64(xv), float64(l[k%16])))
	}
	for d := 8; d >= 1; d /= 2 {
		for j := 0; j < d; j++ {
			l[j] += l[j+d]
		}
	}
	return l[0]
}

// TestHalfSmallShapes calls every generated halfSmall tile shape (2–7
// activation rows × 1 to halfSMaxW weight rows) on reductions with and
// without a last 8 values, and checks every output bit for bit against
// halfSmallRef (and that the tile writes nothing else).
func TestHalfSmallShapes(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 70))
	const os = 11
	for _, dt := range halfTypes {
		for M := 2; M <= 7; M++ {
			for W := 1; W <= halfSMaxW(M); W++ {
				for _, K := range []int{8, 16, 24, 72, 520} {
					ws, xs := 2*(K+8), K+3
					data := randBlocks(r, dt, W, K+8)
					sanitizeHalves(dt, data)
					x := randF(r, M*xs)
					out := randF(r, M*os)
					before := append([]float32(nil), out...)
					halfSmallAVX512(dt == kernels.BF16, M, W, &data[0], ws, &x[0], xs, K, &out[0], os)
					for m := 0; m < M; m++ {
						for o := 0; o < os; o++ {
							want := before[m*os+o]
							if o < W {
								want = halfSmallRef(dt, data[o*ws:], x[m*xs:m*xs+K])
							}
							if math.Float32bits(out[m*os+o]) != math.Float32bits(want) {
								t.Fatalf("%v %dx%d K=%d [%d,%d] = %v, want %v", dt, M, W, K, m, o, out[m*os+o], want)
							}
						}
					}
				}
			}
		}
	}
}

// TestHalfSmallMatMul runs F16/BF16 MatMuls of 1 to 17 activation rows
// (2–7 on the halfSmall tiles with AVX-512) on 1 to 97 weight rows and
// reductions with every kind of tail (past a multiple of 16, of 8, and
// not a multiple of 8): with AVX-512 and without, each within the float64
// product's rounding bound (checkHalfZ), on one and two threads.
func TestHalfSmallMatMul(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 71))
	rows := []int{1, 2, 7, 9, 13, 31, 97}
	ins := []int{8, 24, 31, 40, 77, 1032}
	for _, dt := range halfTypes {
		for n := 1; n <= 17; n++ {
			for j, in := range ins {
				ro := rows[(n+j)%len(rows)]
				threads := 1 + (n+j)%2
				t.Run(fmt.Sprintf("%v/n%d/%dx%d/t%d", dt, n, ro, in, threads), func(t *testing.T) {
					data := randBlocks(r, dt, ro, in)
					sanitizeHalves(dt, data)
					checkHalfZ(t, dt, data, randF(r, n*in), n, ro, in, threads)
				})
			}
		}
	}
}
