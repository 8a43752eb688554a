package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// interleave16 returns the rows of data (rows a multiple of 16, rb bytes
// each, K = rb/2 half-width values) interleaved 16 rows at a time: value k
// of row 16·g+r at byte g·16·rb + 32·k + 2·r (one group's 16 weights of
// each k side by side, the groups one after another).
func interleave16(data []byte, rows, rb int) []byte {
	K := rb / 2
	il := make([]byte, len(data))
	for g := 0; g < rows/16; g++ {
		base := g * 16 * rb
		for r := 0; r < 16; r++ {
			row := data[(16*g+r)*rb:]
			for k := 0; k < K; k++ {
				il[base+32*k+2*r] = row[2*k]
				il[base+32*k+2*r+1] = row[2*k+1]
			}
		}
	}
	return il
}

// TestHalfPanelO checks the outer-product kernels on interleaved weights
// (every prefetch variant) against the widening kernels on the rows they
// came from, bit for bit: the same products summed in the same order.
func TestHalfPanelO(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(17, 90))
	for _, dt := range halfTypes {
		for _, K := range []int{16, 64, 256, 512} {
			data := randBlocks(r, dt, 16, K)
			sanitizeHalves(dt, data)
			il := interleave16(data, 16, 2*K)
			xp := randF(r, 16*K)
			init := randF(r, 256)
			want := append([]float32(nil), init...)
			var buf [16 * halfZMaxW1]float32
			halfPanelZWidenAVX512(dt == kernels.BF16, 16, &xp[0], &data[0], 2*K, K, &want[0], &buf[0])
			got := make([]float32, 256)
			for m := 0; m < 16; m++ {
				for c := 0; c < 16; c++ {
					got[16*m+c] = init[16*c+m]
				}
			}
			for _, v := range []string{"outer", "outerP1024", "outerP2048", "outerP4096"} {
				got := append([]float32(nil), got...)
				halfOKern(dt == kernels.BF16, v)(&xp[0], &il[0], K, &got[0])
				for m := 0; m < 16; m++ {
					for c := 0; c < 16; c++ {
						if g, w := got[16*m+c], want[16*c+m]; math.Float32bits(g) != math.Float32bits(w) {
							t.Fatalf("%v %s K=%d m=%d c=%d: %v, want %v", dt, v, K, m, c, g, w)
						}
					}
				}
			}
		}
	}
}

// BenchmarkHalfPanelOSplit times one panel of 16 activation rows against
// weights streamed from memory (K = 2048, slabs of 8192 rows from 384 MiB
// of distinct rows), one or two threads, with the weights in rows (the
// widening kernel, 16 rows side by side) or interleaved 16 rows at a time
// (the outer-product kernel, one contiguous stream), each thread taking a
// contiguous half of the slab's groups of 16 rows ("halves") or every
// other group ("alt"): GMAC per CPU-second.
func BenchmarkHalfPanelOSplit(b *testing.B) {
	if !hasAVX512 {
		b.Skip("no AVX-512 kernels on this machine or build")
	}
	const K, slab, total = 2048, 8192, 384 << 20
	rb := 2 * K
	rows := total / rb
	r := rand.New(rand.NewPCG(17, 91))
	xp := randF(r, 16*K)
	for _, dt := range halfTypes {
		data := randBlocks(r, dt, rows, K)
		sanitizeHalves(dt, data)
		il := interleave16(data, rows, rb)
		bf := dt == kernels.BF16
		group := func(layout string, g int, acc []float32, buf *[16 * halfZMaxW1]float32) {
			clear(acc)
			for kb, ci := 0, 0; kb < K; kb, ci = kb+halfPanelKc, ci+1 {
				a := acc[(ci&1)*256:]
				if layout == "rows" {
					halfPanelZWidenAVX512(bf, 16, &xp[16*kb], &data[16*g*rb+2*kb], rb, halfPanelKc, &a[0], &buf[0])
				} else {
					halfOKern(bf, layout)(&xp[16*kb], &il[16*g*rb+32*kb], halfPanelKc, &a[0])
				}
			}
		}
		for _, hot := range []int{1, 16} {
			for _, layout := range []string{"rows", "outer", "outerP1024", "outerP2048", "outerP4096"} {
				b.Run(fmt.Sprintf("%v/hot%d/%s", dt, hot, layout), func(b *testing.B) {
					acc := make([]float32, 512)
					var buf [16 * halfZMaxW1]float32
					b.ResetTimer()
					c0 := processCPU()
					for i := 0; i < b.N; i++ {
						for g := 0; g < slab/16; g++ {
							group(layout, g%hot, acc, &buf)
						}
					}
					if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
						b.ReportMetric(float64(16*slab*K)*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
					}
				})
			}
		}
		for _, threads := range []int{1, 2} {
			for _, split := range []string{"halves", "alt"} {
				if threads == 1 && split == "alt" {
					continue
				}
				for _, layout := range []string{"rows", "outer", "outerP1024", "outerP2048", "outerP4096"} {
					b.Run(fmt.Sprintf("%v/t%d/%s/%s", dt, threads, split, layout), func(b *testing.B) {
						accs := make([][]float32, threads)
						bufs := make([][16 * halfZMaxW1]float32, threads)
						for i := range accs {
							accs[i] = make([]float32, 512)
						}
						G := slab / 16
						b.ResetTimer()
						c0 := processCPU()
						s := 0
						for i := 0; i < b.N; i++ {
							g0 := s * G
							var wg sync.WaitGroup
							for t := 0; t < threads; t++ {
								wg.Add(1)
								go func(t int) {
									defer wg.Done()
									if split == "halves" {
										for g := g0 + t*G/threads; g < g0+(t+1)*G/threads; g++ {
											group(layout, g, accs[t], &bufs[t])
										}
										return
									}
									for g := g0 + t; g < g0+G; g += threads {
										group(layout, g, accs[t], &bufs[t])
									}
								}(t)
							}
							wg.Wait()
							if s++; (s+1)*slab > rows {
								s = 0
							}
						}
						if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
							b.ReportMetric(float64(16*slab*K)*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
						}
					})
				}
			}
		}
	}
}

// halfOKern returns the outer-product kernel of a benchmark layout name
// ("outer": no software prefetch; "outerP<d>": PREFETCHT0 d bytes ahead).
func halfOKern(bf bool, layout string) func(xp *float32, w *byte, k int, acc *float32) {
	f := map[string][2]func(xp *float32, w *byte, k int, acc *float32){
		"outer":      {halfPanelOF16P0AVX512, halfPanelOBF16P0AVX512},
		"outerP1024": {halfPanelOF16P1024AVX512, halfPanelOBF16P1024AVX512},
		"outerP2048": {halfPanelOF16P2048AVX512, halfPanelOBF16P2048AVX512},
		"outerP4096": {halfPanelOF16P4096AVX512, halfPanelOBF16P4096AVX512},
	}[layout]
	if bf {
		return f[1]
	}
	return f[0]
}

// BenchmarkHalfThreads times MatMul of 16 rows on F16/BF16 weights of the
// 1B shapes streamed from memory with one and two threads: GMAC per
// CPU-second of all threads.
func BenchmarkHalfThreads(b *testing.B) {
	r := rand.New(rand.NewPCG(29, 30))
	for _, dt := range halfTypes {
		for _, s := range []struct {
			name    string
			out, in int
		}{{"2048x2048", 2048, 2048}, {"8192x2048", 8192, 2048}, {"2048x8192", 2048, 8192}} {
			one := randBlocks(r, dt, s.out, s.in)
			sanitizeHalves(dt, one)
			copies := max(1, streamBytes/len(one))
			ws := make([]kernels.Tensor, copies)
			for i := range ws {
				data := append([]byte(nil), one...)
				w, err := kernels.NewHostWeight(dt, s.out, s.in, data)
				if err != nil {
					b.Fatal(err)
				}
				ws[i] = w
			}
			for _, th := range []int{1, 2} {
				b.Run(fmt.Sprintf("%v/%s/t%d", dt, s.name, th), func(b *testing.B) {
					const n = 16
					be := New(Options{Threads: th})
					defer be.Close()
					x := &kernels.Host{R: n, C: s.in, F: randF(r, n*s.in)}
					o := be.Alloc(n, s.out)
					b.ResetTimer()
					c0 := processCPU()
					for i := 0; i < b.N; i++ {
						be.MatMul(o, x, ws[i%copies], n)
					}
					if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
						b.ReportMetric(float64(n*s.out*s.in)*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
					}
				})
			}
		}
	}
}
