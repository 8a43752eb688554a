//go:build amd64 && !purego

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// TestHalfPanelOneSums checks the one-panel path (halfPanelRows for 8–16
// activation rows) bit for bit against the sums it must equal: every
// weight row alone through the one-row widening kernel over K in chunks
// of halfPanelKc, even chunks into one accumulator set and odd ones into
// the other, added at the end, then the K tail in Go. Ranges with ragged
// ends (1–97 rows, past whole groups of 16 and 384-row ranges), K with
// tails, the AVX-512 and AVX2 kernels, packed once per MatMul or per
// range; nothing outside the range is written. (Session 18 checked a
// per-group variant of the sums with it, docs/bench/f16-bf16.md.)
func TestHalfPanelOneSums(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 91))
	cases := []struct{ n, rows, in int }{
		{8, 1, 8}, {9, 17, 264}, {15, 33, 256}, {16, 1, 2048}, {16, 16, 520}, {16, 31, 2056},
		{16, 97, 300}, {16, 400, 136}, {12, 64, 8192}, {16, 48, 8200},
	}
	for _, dt := range halfTypes {
		bf := dt == kernels.BF16
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/n%d/%dx%d", dt, c.n, c.rows, c.in), func(t *testing.T) {
				data := randBlocks(r, dt, c.rows, c.in)
				sanitizeHalves(dt, data)
				w, err := kernels.NewHostWeight(dt, c.rows, c.in, data)
				if err != nil {
					t.Fatal(err)
				}
				x := &kernels.Host{R: c.n, C: c.in, F: randF(r, c.n*c.in)}
				K, K8, rb := c.in, c.in&^7, 2*c.in
				// the reference: one weight row at a time
				xp := make([]float32, 16*K8)
				for kb := 0; kb < K8; kb += halfPanelKc {
					packRowPanels(xp[16*kb:], x.F, x.C, c.n, kb, min(halfPanelKc, K8-kb))
				}
				want := make([]float32, c.n*c.rows)
				var buf [16 * halfZMaxW1]float32
				for o := 0; o < c.rows; o++ {
					var a [2][16]float32
					for kb, ci := 0, 0; kb < K8; kb, ci = kb+halfPanelKc, ci+1 {
						halfPanelZWidenAVX512(bf, 1, &xp[16*kb], &data[o*rb+2*kb], rb, min(halfPanelKc, K8-kb), &a[ci&1][0], &buf[0])
					}
					for m := 0; m < c.n; m++ {
						v := a[0][m] + a[1][m]
						if K8 < K {
							v += dotHalfGo(dt, data[o*rb+2*K8:(o+1)*rb], x.F[m*K+K8:(m+1)*K])
						}
						want[m*c.rows+o] = v
					}
				}
				sentinel := float32(math.Inf(-1))
				for _, lohi := range [][2]int{{0, c.rows}, {c.rows / 5, c.rows - c.rows/7}, {c.rows / 2, c.rows}} {
					lo, hi := lohi[0], lohi[1]
					for _, k := range []kern{{simd: true, avx2: true}, {avx2: true}} {
						for _, once := range []bool{false, true} {
							out := &kernels.Host{R: c.n, C: c.rows, F: make([]float32, c.n*c.rows)}
							for i := range out.F {
								out.F[i] = sentinel
							}
							q := &qmatTask{k: k, out: out, x: x, w: w, n: c.n}
							q.prepareHalf(1)
							if once {
								q.packPanels()
							}
							q.halfPanels(lo, hi, &q.hp[0])
							for m := 0; m < c.n; m++ {
								for o := 0; o < c.rows; o++ {
									g := out.F[m*c.rows+o]
									if o < lo || o >= hi {
										if g != sentinel {
											t.Fatalf("simd=%v once=%v [%d,%d] outside [%d,%d) written: %v", k.simd, once, m, o, lo, hi, g)
										}
									} else if math.Float32bits(g) != math.Float32bits(want[m*c.rows+o]) {
										t.Fatalf("simd=%v once=%v [%d,%d] of [%d,%d) = %v, want %v", k.simd, once, m, o, lo, hi, g, want[m*c.rows+o])
									}
								}
							}
						}
					}
				}
			})
		}
	}
}
