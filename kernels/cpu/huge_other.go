//go:build !linux

package cpu

// hugeArena is empty off Linux: alloc returns nil and the weight copies
// come from the Go heap.
type hugeArena struct{}

// alloc returns nil: no huge-page mappings off Linux.
func (a *hugeArena) alloc(n int) []byte { return nil }

// free does nothing.
func (a *hugeArena) free() {}

// spare reports false: nothing is copied off Linux.
func (a *hugeArena) spare(n int) bool { return false }
