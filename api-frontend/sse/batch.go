package sse

import (
	"errors"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Batch collects non-blocking sends to many sockets and issues them
// together at Flush: with io_uring, one io_uring_enter for the whole batch
// (one IORING_OP_SEND per socket, MSG_DONTWAIT|MSG_NOSIGNAL), instead of
// one send(2) each. The engine's output goroutine queues one send per
// stream while it dispatches a step's outputs and flushes at the step's
// end. Where io_uring is unavailable (an old kernel, a seccomp filter,
// kernel.io_uring_disabled) NewBatch returns an error and the caller sends
// one by one as before; a Batch built by NewLoopBatch sends each queued
// chunk with send(2) at Flush (tests use it to check the same hand-off on
// any machine).
//
// Add copies the bytes into the batch's own buffer, so the caller's
// buffer is free at once. Queue at most one send per socket per Flush:
// io_uring does not order independent submissions. A Batch is used by one
// goroutine at a time.
type Batch struct {
	ring *uring        // nil: Flush sends with send(2)
	buf  []byte        // queued bytes, back to back
	ents []batchEntry  // queued sends, in Add order
	max  int           // most sends queued at once
	cpu  time.Duration // the flushing threads' CPU time in Flush's sends, in all
}

// batchEntry is one queued send: buf[off:off+n] to fd, and its result.
type batchEntry struct {
	fd     int
	off, n uint32
	res    int32 // bytes sent, or -errno
}

// ErrNoRing is NewBatch's error where io_uring cannot be used.
var ErrNoRing = errors.New("sse: io_uring is not available")

// NewBatch returns a Batch of at most max queued sends that flushes with
// one io_uring_enter, or an error wrapping ErrNoRing (with the system's
// reason) where io_uring is unavailable.
func NewBatch(max int) (*Batch, error) {
	r, err := newURing(uint32(max))
	if err != nil {
		return nil, err
	}
	return &Batch{ring: r, max: min(max, int(r.entries)), buf: make([]byte, 0, 64<<10), ents: make([]batchEntry, 0, max)}, nil
}

// NewLoopBatch returns a Batch of at most max queued sends that Flush sends
// one by one with send(2): the io_uring Batch's behaviour without io_uring.
func NewLoopBatch(max int) *Batch {
	return &Batch{max: max, buf: make([]byte, 0, 64<<10), ents: make([]batchEntry, 0, max)}
}

// Ring reports whether Flush uses io_uring.
func (b *Batch) Ring() bool { return b.ring != nil }

// Len is how many sends are queued (or, after Flush, were flushed).
func (b *Batch) Len() int { return len(b.ents) }

// Full reports whether Add would go over the batch's size: flush first.
func (b *Batch) Full() bool { return len(b.ents) >= b.max }

// Add queues p (copied) for the non-blocking socket fd and returns its
// index for Result. The batch must not be Full.
func (b *Batch) Add(fd int, p []byte) int {
	off := len(b.buf)
	b.buf = append(b.buf, p...)
	b.ents = append(b.ents, batchEntry{fd: fd, off: uint32(off), n: uint32(len(p))})
	return len(b.ents) - 1
}

// AddTwo queues a and then b (both copied) as one send to fd, as Add.
func (b *Batch) AddTwo(fd int, a, p []byte) int {
	off := len(b.buf)
	b.buf = append(append(b.buf, a...), p...)
	b.ents = append(b.ents, batchEntry{fd: fd, off: uint32(off), n: uint32(len(a) + len(p))})
	return len(b.ents) - 1
}

// Bytes returns the bytes queued as send i (valid until Reset).
func (b *Batch) Bytes(i int) []byte {
	e := &b.ents[i]
	return b.buf[e.off : e.off+e.n : e.off+e.n]
}

// Flush sends every queued chunk, each without blocking, and waits for
// their results (Result). If the ring fails as a whole, the sends it did
// not make run with send(2), the ring is dropped (Ring then reports
// false), and the error says why it failed.
func (b *Batch) Flush() error {
	if len(b.ents) == 0 {
		return nil
	}
	c0 := threadCPU()
	defer func() {
		if d := threadCPU() - c0; d > 0 { // < 0: the goroutine moved threads
			b.cpu += d
		}
	}()
	if b.ring != nil {
		done, err := b.ring.sendAll(b.buf, b.ents)
		if err != nil {
			// A ring that failed is not used again: this batch and the
			// next go out with send(2), and Ring reports false.
			b.ring.close()
			b.ring = nil
		}
		for i := done; i < len(b.ents); i++ {
			b.loopSend(i)
		}
		return err
	}
	for i := range b.ents {
		b.loopSend(i)
	}
	return nil
}

// loopSend makes send i with send(2).
func (b *Batch) loopSend(i int) {
	e := &b.ents[i]
	n, errno := sendRaw(e.fd, b.buf[e.off:e.off+e.n])
	if errno != 0 {
		e.res = -int32(errno)
		return
	}
	e.res = int32(n)
}

// Result returns how many bytes of send i the socket took and, when it
// took none, why (syscall.EAGAIN when its buffer was full). Valid after
// Flush, until Reset.
func (b *Batch) Result(i int) (int, error) {
	res := b.ents[i].res
	if res < 0 {
		return 0, syscall.Errno(-res)
	}
	return int(res), nil
}

// SendCPU is the CPU time the flushing threads spent in Flush's sends (the
// io_uring_enter, or the send(2) loop), in all: the kernel's cost of the
// chunks on the frontend's side, the loopback receiver's work included.
// Read it on the goroutine that flushes.
func (b *Batch) SendCPU() time.Duration { return b.cpu }

// threadCPU is the calling thread's CPU clock (CLOCK_THREAD_CPUTIME_ID;
// 0 where the call fails). Flush reads it twice per batch; a goroutine that
// moved threads in between can make the difference wrong (a negative one is
// dropped), so SendCPU is an estimate over many batches.
//
// It is a raw system call (no entersyscall), like the sends it brackets:
// Flush is the first system call of most engine steps, and an
// entersyscall after the frontend's idle gap between steps wakes the
// runtime's sysmon thread from its deep sleep into 20 µs polling for a
// millisecond or more (see rawsock). unix.ClockGettime does that; it
// cost ≈ 0.5 µs of CPU per streamed token at 256 streams
// (docs/bench/frontend.md, session 19). The call cannot block.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if _, _, e := unix.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_THREAD_CPUTIME_ID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// Reset empties the batch for the next round.
func (b *Batch) Reset() {
	b.buf = b.buf[:0]
	b.ents = b.ents[:0]
}

// Close releases the ring.
func (b *Batch) Close() {
	if b.ring != nil {
		b.ring.close()
		b.ring = nil
	}
}
