//go:build amd64 && !purego

package cpu

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// halfZKernel is one 16-row widening kernel (halfPanelZ16{F16,BF16}*).
type halfZKernel func(xp *float32, w *byte, ws int, k int, acc *float32, buf *float32)

// halfZStreamVariants are the kernels BenchmarkHalfZStream compares, per
// encoding: main's 16-row kernel and the 8-row one (fewer weight streams
// per thread, the panel loaded once per 8 FMAs). Software-prefetch
// variants (PREFETCHT0 256–2048 bytes ahead, T1, T2, NTA; once per step or
// once per line) were measured at 6a9aebd and dropped: none beat "base".
func halfZStreamVariants(bf bool) []halfZVariant {
	if bf {
		return []halfZVariant{{"base", halfPanelZ16BF16AVX512, 16}, {"w8", halfPanelZ8BF16AVX512, 8}}
	}
	return []halfZVariant{{"base", halfPanelZ16F16AVX512, 16}, {"w8", halfPanelZ8F16AVX512, 8}}
}

// halfZVariant is one kernel of BenchmarkHalfZStream and its width (weight
// rows per call).
type halfZVariant struct {
	name string
	f    halfZKernel
	w    int
}

// halfZRun runs kernel f over weight rows [lo, hi) (a multiple of 16) of w
// (K values per row, rb bytes apart) as halfPanelRows' one-panel path
// does: each group of 16 rows through K in chunks of halfPanelKc, the
// chunks' sums in two alternating accumulator sets.
func halfZRun(f halfZKernel, W int, w []byte, rb, K, lo, hi int, xp, acc, buf []float32) {
	for o := lo; o < hi; o += W {
		for kb, ci := 0, 0; kb < K; kb, ci = kb+halfPanelKc, ci+1 {
			kn := min(halfPanelKc, K-kb)
			f(&xp[16*kb], &w[o*rb+2*kb], rb, kn, &acc[(ci&1)*256], &buf[0])
		}
	}
}

// halfZStreamTask runs halfZRun on whole groups of 16 rows of one matrix,
// each worker with its own accumulators and buffer (a pool task).
type halfZStreamTask struct {
	f        halfZKernel
	q        []byte
	k, units int // K; 16-row groups per unit
	xp       []float32
	acc, buf [2][]float32
}

func (t *halfZStreamTask) run(lo, hi, w int) {
	halfZRun(t.f, 16, t.q, 2*t.k, t.k, 16*t.units*lo, 16*t.units*hi, t.xp, t.acc[w], t.buf[w])
}

// BenchmarkHalfZStreamPool is BenchmarkHalfZStream's "mem" case on two
// threads through the backend's pool, one op per matrix: "halves" (two
// chunks, one per thread) against "guided" (parallelGuidedFine over the
// 16-row groups, as MatMul's one-panel ops run) and "guided-pack" (the
// same with the caller writing the activation panel before each op, as
// packPanels does): what the op's barrier, the guided chunks and the
// panel written on the other core cost the kernel, against the direct
// halves (no pool, no barrier) of BenchmarkHalfZStream.
func BenchmarkHalfZStreamPool(b *testing.B) {
	if !hasAVX512 {
		b.Skip("no AVX-512 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(29, 41))
	for _, dt := range halfTypes {
		b.Run(dt.String(), func(b *testing.B) {
			var arena hugeArena
			defer arena.free()
			type mat struct {
				q    []byte
				r, k int
			}
			var mats []mat
			var mac float64
			for _, s := range halfLayer1B {
				q := randBlocks(r, dt, s.out, s.in)
				sanitizeHalves(dt, q)
				for l := 0; l < 10; l++ {
					mats = append(mats, mat{hugeCopy(&arena, q), s.out, s.in})
					mac += float64(16 * s.out * s.in)
				}
			}
			f := halfZStreamVariants(dt == kernels.BF16)[0].f
			xp := randF(r, 16*8192)
			src := randF(r, 16*8192)
			for _, split := range []string{"halves", "guided", "guided-pack"} {
				b.Run(split, func(b *testing.B) {
					p := newPool(2, true)
					defer p.close()
					t := &halfZStreamTask{f: f, xp: xp}
					for w := range 2 {
						t.acc[w], t.buf[w] = make([]float32, 512), make([]float32, 256)
					}
					b.ResetTimer()
					c0 := processCPU()
					for i := 0; i < b.N; i++ {
						for l := 0; l < 10; l++ { // layer by layer, as the model steps
							for j := range halfLayer1B {
								m := mats[j*10+l]
								t.q, t.k = m.q, m.k
								if split == "guided-pack" { // the caller writes the panel, as packPanels does
									copy(xp[:16*m.k], src)
								}
								if split == "halves" {
									t.units = m.r / 32
									p.parallel(2, 1, 0, t)
								} else {
									t.units = 1
									p.parallelGuidedFine(m.r/16, 1, 0, t)
								}
							}
						}
					}
					if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
						b.ReportMetric(mac*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
					}
				})
			}
		})
	}
}

// BenchmarkHalfZStream times the 16-row widening kernels directly (no
// pool) on one or two locked threads, each on a contiguous half of every
// matrix's rows as MatMul's guided chunks nearly are, over the 1B layer's
// shapes cycled through "mem" (10 layers, 1.22 GB) or each thread's own
// 384×2048 matrix repeated ("l2"), in 2 MiB pages as the loader places
// them: GMAC per CPU-second of all threads.
func BenchmarkHalfZStream(b *testing.B) {
	if !hasAVX512 {
		b.Skip("no AVX-512 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(29, 37))
	for _, dt := range halfTypes {
		bf := dt == kernels.BF16
		for _, set := range []string{"mem", "l2"} {
			b.Run(fmt.Sprintf("%v/%s", dt, set), func(b *testing.B) {
				type mat struct {
					q    []byte
					r, k int
				}
				var mats []mat
				var arena hugeArena
				defer arena.free()
				reps := 1
				if set == "mem" {
					proto := make([][]byte, len(halfLayer1B))
					for i, s := range halfLayer1B {
						proto[i] = randBlocks(r, dt, s.out, s.in)
						sanitizeHalves(dt, proto[i])
					}
					for l := 0; l < 10; l++ {
						for i, s := range halfLayer1B {
							mats = append(mats, mat{hugeCopy(&arena, proto[i]), s.out, s.in})
						}
					}
				} else {
					q := randBlocks(r, dt, 768, 2048)
					sanitizeHalves(dt, q)
					mats = []mat{{hugeCopy(&arena, q), 768, 2048}}
					reps = 400
				}
				xp := randF(r, 16*8192)
				for _, th := range []int{1, 2} {
					for _, v := range halfZStreamVariants(bf) {
						b.Run(fmt.Sprintf("t%d/%s", th, v.name), func(b *testing.B) {
							run := func(t int) {
								acc := make([]float32, 512)
								buf := make([]float32, 256)
								for _, m := range mats {
									rows := m.r
									lo, hi := 0, rows
									if set == "l2" { // each thread its own 384 rows
										lo, hi = 384*t, 384*t+384
									} else if th == 2 {
										half := (rows / 2) &^ 15
										lo, hi = []int{0, half}[t], []int{half, rows}[t]
									}
									for i := 0; i < reps; i++ {
										halfZRun(v.f, v.w, m.q, 2*m.k, m.k, lo, hi, xp, acc, buf)
									}
								}
							}
							var mac float64
							for _, m := range mats {
								rows := m.r
								if set == "l2" {
									rows = 384 * th
								}
								mac += float64(16*rows*m.k) * float64(reps)
							}
							b.ResetTimer()
							c0 := processCPU()
							for i := 0; i < b.N; i++ {
								var wg sync.WaitGroup
								for t := 0; t < th; t++ {
									wg.Add(1)
									go func() {
										defer wg.Done()
										runtime.LockOSThread()
										defer runtime.UnlockOSThread()
										run(t)
									}()
								}
								wg.Wait()
							}
							if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
								b.ReportMetric(mac*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
							}
						})
					}
				}
			})
		}
	}
}
