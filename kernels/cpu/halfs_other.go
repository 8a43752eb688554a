//go:build !amd64 || purego

package cpu

// halfSMaxW mirrors halfs_amd64.go (no AVX-512 kernels here).
func halfSMaxW(m int) int { return 0 }

func halfSmallAVX512(bf16 bool, m, wn int, w *byte, ws int, x *float32, xs int, n int, out *float32, os int) {
	panic("unreachable")
}
