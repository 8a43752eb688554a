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

// BenchmarkF16WidenZ is VCVTPH2PS ymm → zmm alone (F16 → float32, 16
// values per instruction): its GMAC/cpu-s figure counts values widened.
func BenchmarkF16WidenZ(b *testing.B) {
	if !cpu.X86.HasAVX512F {
		b.Skip("SKIP: needs AVX-512")
	}
	run(b, cvtZLoop, 12*16)
}

// BenchmarkBF16WidenZ is the BF16 widening (VPMOVZXWD + VPSLLD) alone; its
// GMAC/cpu-s figure counts values widened.
func BenchmarkBF16WidenZ(b *testing.B) {
	if !cpu.X86.HasAVX512BW {
		b.Skip("SKIP: needs AVX-512 BW")
	}
	run(b, bf16ZLoop, 12*16)
}

// BenchmarkF32FMAZWidenF16 is 16 zmm FMAs per VCVTPH2PS (the one-panel
// F16 kernel's mix of 16 rows per widened weight): the ceiling the
// widening leaves the 16-sequence decode, in multiply-adds.
func BenchmarkF32FMAZWidenF16(b *testing.B) {
	if !cpu.X86.HasAVX512F {
		b.Skip("SKIP: needs AVX-512")
	}
	run(b, fmaCvtZLoop, 16*16)
}

// BenchmarkF32FMAZWidenBF16 is BenchmarkF32FMAZWidenF16 with the BF16
// widening.
func BenchmarkF32FMAZWidenBF16(b *testing.B) {
	if !cpu.X86.HasAVX512BW {
		b.Skip("SKIP: needs AVX-512 BW")
	}
	run(b, fmaBF16ZLoop, 16*16)
}
