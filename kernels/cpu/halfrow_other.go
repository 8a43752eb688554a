//go:build !amd64 || purego

package cpu

func dotF16Rows3AVX2(w *byte, x *float32, n int, groups int, out *float32)  { panic("unreachable") }
func dotBF16Rows3AVX2(w *byte, x *float32, n int, groups int, out *float32) { panic("unreachable") }
