//go:build !amd64 || purego

package cpu

// Stubs of halfo_amd64.s (no AVX-512 kernels here; never called).

func halfPanelOF16P0AVX512(xp *float32, w *byte, k int, acc *float32)     { panic("unreachable") }
func halfPanelOF16P1024AVX512(xp *float32, w *byte, k int, acc *float32)  { panic("unreachable") }
func halfPanelOF16P2048AVX512(xp *float32, w *byte, k int, acc *float32)  { panic("unreachable") }
func halfPanelOF16P4096AVX512(xp *float32, w *byte, k int, acc *float32)  { panic("unreachable") }
func halfPanelOBF16P0AVX512(xp *float32, w *byte, k int, acc *float32)    { panic("unreachable") }
func halfPanelOBF16P1024AVX512(xp *float32, w *byte, k int, acc *float32) { panic("unreachable") }
func halfPanelOBF16P2048AVX512(xp *float32, w *byte, k int, acc *float32) { panic("unreachable") }
func halfPanelOBF16P4096AVX512(xp *float32, w *byte, k int, acc *float32) { panic("unreachable") }
