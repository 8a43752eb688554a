//go:build !linux

package cpu

// prefault does nothing off Linux: the first writes fault the pages in.
func prefault(b []byte) {}
