package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// llama1B are the matrix shapes [out × in] of Llama-3.2-1B's layers (and a
// 32000-token output projection).
var llama1B = []struct {
	name    string
	out, in int
}{{"2048x2048", 2048, 2048}, {"512x2048", 512, 2048}, {"8192x2048", 8192, 2048}, {"2048x8192", 2048, 8192}, {"32000x2048", 32000, 2048}}

// streamBytes is how many bytes of distinct weight copies a batch-1
// benchmark cycles through, so that weights come from memory, not the
// 32 MiB L3.
const streamBytes = 256 << 20

// BenchmarkStoredMatMul times MatMul on each stored encoding at the 1B
// shapes for batches of 1, 16 and 128 rows. GB/s counts weight bytes
// (compare batch 1 with the machine's memory bandwidth); GMAC/s counts
// multiply-adds.
func BenchmarkStoredMatMul(b *testing.B) {
	r := rand.New(rand.NewPCG(17, 17))
	for _, dt := range storedTypes {
		for _, s := range llama1B {
			for _, n := range []int{1, 16, 32, 64, 128} {
				b.Run(fmt.Sprintf("%v/%s/n%d", dt, s.name, n), func(b *testing.B) {
					one := randBlocks(r, dt, s.out, s.in)
					copies := 1
					if n == 1 {
						copies = max(1, streamBytes/len(one))
					}
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
					x := &kernels.Host{R: n, C: s.in, F: randF(r, n*s.in)}
					o := be.Alloc(n, s.out)
					b.SetBytes(int64(len(one)))
					b.ResetTimer()
					c0 := processCPU()
					for i := 0; i < b.N; i++ {
						be.MatMul(o, x, ws[i%copies], n)
					}
					cpuSec := (processCPU() - c0).Seconds()
					sec := b.Elapsed().Seconds()
					b.ReportMetric(float64(len(one))*float64(b.N)/sec/1e9, "GB/s")
					b.ReportMetric(float64(n*s.out*s.in)*float64(b.N)/sec/1e9, "GMAC/s")
					if cpuSec > 0 {
						// weight bytes per CPU-second of all threads (spinning
						// included): what the kernels do per core when the
						// machine is loaded
						b.ReportMetric(float64(len(one))*float64(b.N)/cpuSec/1e9, "GB/cpu-s")
						b.ReportMetric(float64(n*s.out*s.in)*float64(b.N)/cpuSec/1e9, "GMAC/cpu-s")
					}
				})
			}
		}
	}
}

// useMoreBits is llama.cpp's choice of the layers whose attn_v and
// ffn_down weights a Q4_K_M or Q5_K_M file stores as Q6_K.
func useMoreBits(l, layers int) bool {
	return l < layers/8 || l >= 7*layers/8 || (l-layers/8)%3 == 2
}

// BenchmarkDecodeStep1B runs, per iteration, every matrix product of one
// step of a Llama-3.2-1B-shaped model (16 layers of q, k, v, o, gate, up,
// down, and a 32000-row output projection) on distinct weights in one
// file format, for 1 and 16 sequences: the weight-streaming part of a
// decode step. tok/s is n / step time; GB/s counts weight bytes.
func BenchmarkDecodeStep1B(b *testing.B) {
	const layers, dim, kv, ffn, vocab = 16, 2048, 512, 8192, 32000
	type format struct {
		name            string
		main, more, out kernels.DType
	}
	for _, f := range []format{
		{"Q4_K_M", kernels.Q4_K, kernels.Q6_K, kernels.Q6_K},
		{"Q5_K_M", kernels.Q5_K, kernels.Q6_K, kernels.Q6_K},
		{"Q6_K", kernels.Q6_K, kernels.Q6_K, kernels.Q6_K},
		{"Q8_0", kernels.Q8_0, kernels.Q8_0, kernels.Q8_0},
		{"Q4_0", kernels.Q4_0, kernels.Q4_0, kernels.Q6_K},
		{"F16", kernels.F16, kernels.F16, kernels.F16},
		{"BF16", kernels.BF16, kernels.BF16, kernels.BF16},
	} {
		for _, n := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/n%d", f.name, n), func(b *testing.B) {
				r := rand.New(rand.NewPCG(17, 18))
				be := New(Options{QuantizeActivations: true})
				defer be.Close()
				type mm struct{ w, x, o kernels.Tensor }
				var ops []mm
				var bytes int
				add := func(dt kernels.DType, out, in int) {
					data := randBlocks(r, dt, out, in)
					w, err := kernels.NewHostWeight(dt, out, in, data)
					if err != nil {
						b.Fatal(err)
					}
					ops = append(ops, mm{w, &kernels.Host{R: n, C: in, F: randF(r, n*in)}, be.Alloc(n, out)})
					bytes += len(data)
				}
				for l := 0; l < layers; l++ {
					more := f.main
					if useMoreBits(l, layers) {
						more = f.more
					}
					add(f.main, dim, dim) // q
					add(f.main, kv, dim)  // k
					add(more, kv, dim)    // v
					add(f.main, dim, dim) // o
					add(f.main, ffn, dim) // gate
					add(f.main, ffn, dim) // up
					add(more, dim, ffn)   // down
				}
				add(f.out, vocab, dim)
				b.ResetTimer()
				c0 := processCPU()
				for i := 0; i < b.N; i++ {
					for _, op := range ops {
						be.MatMul(op.o, op.x, op.w, n)
					}
				}
				if cpuSec := (processCPU() - c0).Seconds() / float64(b.N); cpuSec > 0 {
					// tokens per CPU-second of all threads (spinning
					// included): on a loaded machine, steadier than tok/s;
					// two idle cores reach at most twice this
					b.ReportMetric(float64(n)/cpuSec, "tok/cpu-s")
				}
				sec := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(sec*1e3, "ms/step")
				b.ReportMetric(float64(n)/sec, "tok/s")
				b.ReportMetric(float64(bytes)/sec/1e9, "GB/s")
				b.ReportMetric(float64(bytes)/1e6, "MB")
			})
		}
	}
}

// BenchmarkRowLoopL2 times the batch-1 row-loop kernel of each stored type
// on one thread with 256 rows of 2048 values (the block types' 136–430 KiB
// stay in L2, F16/BF16's 1 MiB in L3), so that it measures the kernel's
// arithmetic, not memory.
// GB/s counts weight bytes; compare with BenchmarkStoredMatMul's n1
// (streaming from memory).
func BenchmarkRowLoopL2(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	const rows, in = 256, 2048
	r := rand.New(rand.NewPCG(17, 19))
	k := kern{avx2: true}
	for _, dt := range []kernels.DType{kernels.F16, kernels.BF16, kernels.Q8_0, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K} {
		b.Run(dt.String(), func(b *testing.B) {
			data := randBlocks(r, dt, rows, in)
			w, err := kernels.NewHostWeight(dt, rows, in, data)
			if err != nil {
				b.Fatal(err)
			}
			x := &kernels.Host{R: 1, C: in, F: randF(r, in)}
			t := &qmatTask{k: k, out: &kernels.Host{R: 1, C: rows, F: make([]float32, rows)}, x: x, w: w, n: 1}
			if q, blk := quantized(dt); q {
				t.act.quantize(k, x.F, in, 1, in, blk)
			}
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			c0 := processCPU()
			for i := 0; i < b.N; i++ {
				t.rows1(t.w, t.out, 0, rows)
			}
			if cpuSec := (processCPU() - c0).Seconds(); cpuSec > 0 {
				b.ReportMetric(float64(len(data))*float64(b.N)/cpuSec/1e9, "GB/cpu-s")
			}
		})
	}
}

// BenchmarkKRowKernels compares the one-row and the two-row k-quant row
// loops (Q4_K) on one thread, alternating them within each iteration so that
// both see the same load: weights in L2 (256 rows of 2048 values, the
// kernels' arithmetic) and streamed from memory (streamBytes of rows, in
// chunks of 64 rows as the pool hands them out). GB/cpu-s counts weight
// bytes per CPU-second of each kernel.
func BenchmarkKRowKernels(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 kernels on this machine or build")
	}
	const in, chunk = 2048, 64
	type rowLoop func(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32)
	r := rand.New(rand.NewPCG(17, 20))
	var a actQ
	a.quantize(kern{avx2: true}, randF(r, in), in, 1, in, 256)
	nb := in / 256
	for _, k := range []struct {
		dt       kernels.DType
		one, two rowLoop
	}{{kernels.Q4_K, dotQ4KRowsAVX2, dotQ4KRows2AVX2}} {
		rb := k.dt.RowBytes(in)
		loops := [2]rowLoop{k.one, k.two}
		for _, place := range []struct {
			name string
			rows int
		}{{"L2", 256}, {"mem", streamBytes / rb}} {
			b.Run(k.dt.String()+"/"+place.name, func(b *testing.B) {
				rows := place.rows &^ (chunk - 1)
				data := randBlocks(r, k.dt, rows, in)
				out := make([]float32, rows)
				var cpu [2]float64
				for i := 0; i < b.N; i++ {
					for j := range loops {
						v := (i + j) % 2
						c0 := processCPU()
						for o := 0; o < rows; o += chunk {
							loops[v](&data[o*rb], &a.q[0], &a.d[0], &a.bs[0], nb, chunk, &out[o])
						}
						cpu[v] += (processCPU() - c0).Seconds()
					}
				}
				for v, name := range []string{"rows1", "rows2"} {
					if cpu[v] > 0 {
						b.ReportMetric(float64(len(data))*float64(b.N)/cpu[v]/1e9, name+"-GB/cpu-s")
					}
				}
			})
		}
	}
}
