package peak

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// BenchmarkF32FMAZ is float32 FMA on 512-bit registers (the AVX-512
// F16/BF16 panels' arithmetic; 12 independent sums, enough for two FMA
// ports of 4 cycles' latency).
func BenchmarkF32FMAZ(b *testing.B) {
	if !cpu.X86.HasAVX512F {
		b.Skip("SKIP: needs AVX-512")
	}
	run(b, fmaZLoop, 12*16)
}
