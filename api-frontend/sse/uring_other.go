//go:build !linux

package sse

// uring is io_uring's ring: Linux only.
type uring struct{ entries uint32 }

// newURing fails: io_uring is Linux only.
func newURing(entries uint32) (*uring, error) { return nil, ErrNoRing }

// close does nothing.
func (r *uring) close() {}

// sendAll is never called (no ring is made).
func (r *uring) sendAll(buf []byte, ents []batchEntry) (int, error) { return 0, ErrNoRing }
