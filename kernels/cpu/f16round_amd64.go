//go:build amd64 && !purego

package cpu

// Declaration of the generated float16 rounding of f16round_amd64.s.

//go:noescape
func roundF16AVX2(x *float32, n int, s float32)
