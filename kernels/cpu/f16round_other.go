//go:build !amd64 || purego

package cpu

func roundF16AVX2(x *float32, n int, s float32) {
	panic("unreachable")
}
