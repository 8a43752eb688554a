package peak

import (
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/cpu"
)

// processCPU is the CPU time of the process so far.
func processCPU() time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

// run times f and reports multiply-adds per CPU-second (mac per
// iteration of f's loop).
func run(b *testing.B, f func(int), mac float64) {
	if !available || !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		b.Skip("SKIP: needs amd64 with AVX2 and FMA")
	}
	const n = 1 << 20
	c0 := processCPU()
	for i := 0; i < b.N; i++ {
		f(n)
	}
	if s := (processCPU() - c0).Seconds(); s > 0 {
		b.ReportMetric(mac*n*float64(b.N)/s/1e9, "GMAC/cpu-s")
	}
}

// BenchmarkInt8 is the int8 kernels' instruction pair per 32 multiply-adds.
func BenchmarkInt8(b *testing.B) { run(b, maddLoop, 8*32) }

// BenchmarkInt8MaddubsOnly is VPMADDUBSW alone.
func BenchmarkInt8MaddubsOnly(b *testing.B) { run(b, maddOnlyLoop, 8*32) }

// BenchmarkInt8Chain is the ×8 tiles' chain per 32 multiply-adds and row:
// VPMADDUBSW, VPMADDWD by the sub-block scale, VPADDD into an int32
// accumulator.
func BenchmarkInt8Chain(b *testing.B) { run(b, chainLoop, 8*32) }

// BenchmarkInt8KT is the transposed Q4_K tiles' chain per 256
// multiply-adds and row: 8 VPMADDUBSW, 7 VPADDW (word sums), one VPMADDWD
// by the 8 sub-block scales, one VPADDD.
func BenchmarkInt8KT(b *testing.B) { run(b, ktLoop, 2*256) }

// BenchmarkF32FMA is float32 FMA (the F16/BF16 kernels' arithmetic).
func BenchmarkF32FMA(b *testing.B) { run(b, fmaLoop, 10*8) }
