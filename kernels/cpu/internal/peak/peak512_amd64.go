//go:build amd64 && !purego

package peak

// fmaZLoop runs n iterations of 12 float32 FMAs on zmm registers (192
// multiply-adds): the AVX-512 F16/BF16 panels' arithmetic.
func fmaZLoop(n int)
