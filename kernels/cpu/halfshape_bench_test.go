package cpu

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// gptOSSHalf are gpt-oss-20b's BF16 matrix shapes [out × in]: the
// attention's q, k/v and o projections, the router, and one eighth of the
// 201088×2880 output projection (same rows per thread and streaming, an
// eighth of the memory), with Llama-3.2-1B's 2048×2048 for comparison.
var gptOSSHalf = []struct {
	name    string
	out, in int
}{{"q4096x2880", 4096, 2880}, {"kv512x2880", 512, 2880}, {"o2880x4096", 2880, 4096}, {"router32x2880", 32, 2880}, {"out25136x2880", 25136, 2880}, {"1b2048x2048", 2048, 2048}}

// BenchmarkHalfShapes times MatMul on F16 and BF16 weights at gpt-oss-20b's
// shapes for 1 and 16 activation rows, the weights cycled through distinct
// copies of at least streamBytes so that they come from memory as in a
// model's step. GB/cpu-s counts weight bytes and GMAC/cpu-s multiply-adds
// per CPU-second of all threads.
func BenchmarkHalfShapes(b *testing.B) {
	r := rand.New(rand.NewPCG(29, 29))
	for _, dt := range []kernels.DType{kernels.BF16, kernels.F16} {
		for _, s := range gptOSSHalf {
			for _, n := range []int{1, 16} {
				b.Run(fmt.Sprintf("%v/%s/n%d", dt, s.name, n), func(b *testing.B) {
					one := randBlocks(r, dt, s.out, s.in)
					copies := max(1, streamBytes/len(one))
					ws := make([]kernels.Tensor, copies)
					for i := range ws {
						data := one
						if i > 0 {
							data = append([]byte(nil), one...)
						}
						w, err := kernels.NewHostWeight(dt, s.out, s.in, data)
						if err != nil {
							b.Fatal(err)
						}
						ws[i] = w
					}
					be := New(Options{QuantizeActivations: true})
					defer be.Close()
					benchHalfMatMul(b, be, r, ws, n, s.out, s.in, len(one))
				})
			}
		}
	}
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
			b.Run(fmt.Sprintf("%v/%s", dt, s.name), func(b *testing.B) {
				one := randBlocks(r, dt, s.out, s.in)
				sanitizeHalves(dt, one)
				copies := max(1, streamBytes/len(one))
				ws := make([]kernels.Tensor, copies)
				for i := range ws {
					w, err := kernels.NewHostWeight(dt, s.out, s.in, append([]byte(nil), one...))
					if err != nil {
						b.Fatal(err)
					}
					ws[i] = w
				}
				for _, th := range []int{1, 2} {
					b.Run(fmt.Sprintf("t%d", th), func(b *testing.B) {
						be := New(Options{Threads: th})
						defer be.Close()
						benchHalfMatMul(b, be, r, ws, 16, s.out, s.in, len(one))
					})
				}
			})
		}
	}
}

// benchHalfMatMul times be.MatMul of n random activation rows against the
// out × in weights ws, cycled so that they come from memory, and reports
// weight GB and GMAC per CPU-second of all threads (weightBytes: one
// weight's size).
func benchHalfMatMul(b *testing.B, be *Backend, r *rand.Rand, ws []kernels.Tensor, n, out, in, weightBytes int) {
	x := &kernels.Host{R: n, C: in, F: randF(r, n*in)}
	o := be.Alloc(n, out)
	b.ResetTimer()
	c0 := processCPU()
	for i := 0; i < b.N; i++ {
		be.MatMul(o, x, ws[i%len(ws)], n)
	}
	if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
		b.ReportMetric(float64(weightBytes)*float64(b.N)/cpuSec/1e9, "GB/cpu-s")
		b.ReportMetric(float64(n*out*in)*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
	}
}

// halfLayer1B is one Llama-3.2-1B layer's matrices [out × in] in the order
// a decode step runs them: q, k, v, o, gate, up, down (60.8 M weights).
var halfLayer1B = []struct{ out, in int }{{2048, 2048}, {512, 2048}, {512, 2048}, {2048, 2048}, {8192, 2048}, {8192, 2048}, {2048, 8192}}

// halfModelSets are BenchmarkHalfThreadsModel's working sets: "mem" cycles
// through 10 distinct copies of a 1B layer (1.22 GB in F16/BF16: weights
// come from memory, as in the model's 2 GB per step), "l3" through 2
// (243 MB ≈ the host's L3, what BenchmarkHalfThreads cycles) and "l2" one
// matrix of 384 rows of 2048 per thread (1.5 MiB: every thread's rows stay
// in its L2), 200 times per pass.
var halfModelSets = []struct {
	name   string
	layers int // copies of halfLayer1B; 0: the l2 matrix
}{{"mem", 10}, {"l3", 2}, {"l2", 0}}

// hugeCopy returns a copy of q in arena's huge pages, as the loader's
// copyHuge places F16/BF16 weights, or on the Go heap where the arena has
// none.
func hugeCopy(arena *hugeArena, q []byte) []byte {
	if c := arena.alloc(len(q)); c != nil {
		copy(c, q)
		return c
	}
	return append([]byte(nil), q...)
}

// BenchmarkHalfThreadsModel times MatMul of 16 rows on F16/BF16 weights of
// the 1B layer's shapes with one and two threads, the weights cycled
// through distinct matrices of more than 1 GiB ("mem"), of the host's L3
// ("l3") or of one thread's L2 ("l2"), in 2 MiB pages as the loader places
// them (copyHuge): GMAC per CPU-second of all threads.
// "mem" is the case whose rates match the model's decode profiles. In
// "l2" the pool's guided chunks give a 16-row group to whichever thread
// claims it, so with two threads rows move between the cores' L2s from one
// call to the next: compare BenchmarkHalfZStream's "l2" (fixed halves) for
// the kernel's in-L2 rate.
func BenchmarkHalfThreadsModel(b *testing.B) {
	r := rand.New(rand.NewPCG(29, 31))
	for _, dt := range halfTypes {
		for _, set := range halfModelSets {
			b.Run(fmt.Sprintf("%v/%s", dt, set.name), func(b *testing.B) {
				shapes := halfLayer1B
				reps := 1
				if set.layers == 0 {
					shapes = []struct{ out, in int }{{384, 2048}, {768, 2048}}
					reps = 200
				}
				proto := make([][]byte, len(shapes))
				for i, s := range shapes {
					proto[i] = randBlocks(r, dt, s.out, s.in)
					sanitizeHalves(dt, proto[i])
				}
				var ws []kernels.Tensor
				var macs []int
				var arena hugeArena
				defer arena.free()
				for l := 0; l < max(1, set.layers); l++ {
					for i, s := range shapes {
						w, err := kernels.NewHostWeight(dt, s.out, s.in, hugeCopy(&arena, proto[i]))
						if err != nil {
							b.Fatal(err)
						}
						ws = append(ws, w)
						macs = append(macs, 16*s.out*s.in)
					}
				}
				xs := map[int]*kernels.Host{}
				outs := map[int]kernels.Tensor{}
				for _, th := range []int{1, 2} {
					b.Run(fmt.Sprintf("t%d", th), func(b *testing.B) {
						be := New(Options{Threads: th})
						defer be.Close()
						for _, s := range shapes {
							if xs[s.in] == nil {
								xs[s.in] = &kernels.Host{R: 16, C: s.in, F: randF(r, 16*s.in)}
							}
						}
						clear(outs)
						for _, s := range shapes {
							if outs[s.out] == nil {
								outs[s.out] = be.Alloc(16, s.out)
							}
						}
						for _, w := range ws { // warm: every matrix once
							be.MatMul(outs[w.Rows()], xs[w.Cols()], w, 16)
						}
						ws, macs := ws, macs
						if set.layers == 0 { // the l2 matrix of th·384 rows
							ws, macs = ws[th-1:th], macs[th-1:th]
						}
						stats := th > 1 && os.Getenv("SLUICE_BENCH_OPSTATS") != ""
						if stats {
							be.RecordOps(true)
						}
						b.ResetTimer()
						var mac float64
						c0 := processCPU()
						for i := 0; i < b.N; i++ {
							for j, w := range ws {
								for range reps {
									be.MatMul(outs[w.Rows()], xs[w.Cols()], w, 16)
									mac += float64(macs[j])
								}
							}
						}
						if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
							b.ReportMetric(mac/cpuSec/1e9, "GMAC/cpu-s")
							b.ReportMetric(cpuSec*1e3/float64(b.N), "cpu-ms/pass")
							if stats {
								st := be.OpStats()
								be.RecordOps(false)
								b.ReportMetric(100*st.AwaitCPU.Seconds()/cpuSec, "await-%")
								b.ReportMetric(100*st.JoinCPU.Seconds()/cpuSec, "join-%")
								b.ReportMetric(100*st.ChunkCPU.Seconds()/cpuSec, "chunk-%")
								b.ReportMetric(100*st.Imbalance(), "imb-%")
							}
						}
					})
				}
			})
		}
	}
}
