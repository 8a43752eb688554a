//go:build !amd64 || purego

package cpu

func clampedSwiGLUAVX2(dst, gate, up *float32, n int, alpha, limit float32) { panic("unreachable") }
