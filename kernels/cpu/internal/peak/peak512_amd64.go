//go:build amd64 && !purego

package peak

// fmaZLoop runs n iterations of 12 float32 FMAs on zmm registers (192
// multiply-adds): the AVX-512 F16/BF16 panels' arithmetic.
func fmaZLoop(n int)

// cvtZLoop runs n iterations of 12 VCVTPH2PS ymm → zmm (192 F16 values).
func cvtZLoop(n int)

// bf16ZLoop runs n iterations of 12 BF16 widenings to zmm (VPMOVZXWD and
// VPSLLD; 192 values).
func bf16ZLoop(n int)

// fmaCvtZLoop runs n iterations of 16 zmm FMAs (256 multiply-adds) and
// one VCVTPH2PS ymm → zmm: the one-panel F16 kernel's mix.
func fmaCvtZLoop(n int)

// fmaBF16ZLoop is fmaCvtZLoop with one BF16 widening (VPMOVZXWD, VPSLLD).
func fmaBF16ZLoop(n int)
