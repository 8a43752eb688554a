package prefetch

import (
	"testing"
	"unsafe"
)

// TestRange: prefetching any range, aligned or not, empty or nil,
// neither faults nor changes memory.
func TestRange(t *testing.T) {
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(i)
	}
	for _, off := range []int{0, 1, 63, 64, 65, 1000} {
		for _, n := range []int{0, 1, 63, 64, 65, 128, 2000} {
			Range(unsafe.Pointer(&buf[off]), uintptr(n))
		}
	}
	Range(nil, 100)
	for i := range buf {
		if buf[i] != byte(i) {
			t.Fatalf("byte %d changed", i)
		}
	}
}

func BenchmarkRange(b *testing.B) {
	buf := make([]byte, 1024)
	for i := 0; i < b.N; i++ {
		Range(unsafe.Pointer(&buf[0]), 512)
	}
}
