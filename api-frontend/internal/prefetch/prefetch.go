// Package prefetch asks the CPU to start loading memory that is about to be
// read, without waiting for it: PREFETCHT0 on amd64, nothing elsewhere.
//
// A plain load of a missing line makes the CPU retire nothing after it
// until the line arrives, so "touching" the next item's memory early only
// moves the stall; a prefetch instruction retires at once and the line
// arrives in the background. The api-frontend uses it to bring the next
// streams' state into the caches while the current stream's socket write
// runs (with 1024 streams each stream's state has left the caches by its
// next token). Go has no prefetch intrinsic, hence the assembly.
package prefetch

import "unsafe"

// LineSize is the cache line size assumed (64 bytes on every amd64 and
// most arm64 parts).
const LineSize = 64

// Range prefetches every cache line of the n bytes at p. It never faults:
// prefetching an address that is not mapped does nothing.
func Range(p unsafe.Pointer, n uintptr) {
	if n == 0 || p == nil {
		return
	}
	lines(p, n)
}
