//go:build !amd64 || purego

package cpu

func addRowAVX2(x, b *float32, n int) { panic("unreachable") }

func scaleAddAVX2(o, x *float32, w float32, n int) { panic("unreachable") }
