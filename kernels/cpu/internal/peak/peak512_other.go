//go:build !amd64 || purego

package peak

func fmaZLoop(n int) { panic("unreachable") }
