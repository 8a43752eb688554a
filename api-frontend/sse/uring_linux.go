package sse

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// uring is a minimal io_uring (raw system calls, no library) that makes a
// batch's sends with one io_uring_enter: IORING_OP_SEND with
// MSG_DONTWAIT, so the kernel completes each inline (a full socket
// completes with -EAGAIN instead of waiting) and every completion is
// posted when the call returns.
type uring struct {
	fd             int
	sq, cq, sqes   []byte
	sqHead, sqTail *uint32
	sqMask         uint32
	sqArray        unsafe.Pointer
	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           unsafe.Pointer
	entries        uint32 // submission slots
}

// ioUringParams is struct io_uring_params (linux/io_uring.h).
type ioUringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  struct {
		head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
		userAddr                                                        uint64
	}
	cqOff struct {
		head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
		userAddr                                                        uint64
	}
}

// The system call numbers are the same on every Linux architecture (the
// generic table's; io_uring is newer than the split).
const (
	sysIOUringSetup      = 425
	sysIOUringEnter      = 426
	ioringOffSQRing      = 0
	ioringOffCQRing      = 0x8000000
	ioringOffSQEs        = 0x10000000
	ioringEnterGetEvents = 1
	ioringOpSend         = 26
	sqeSize              = 64
	cqeSize              = 16
)

// newURing sets up a ring of at least entries submissions.
func newURing(entries uint32) (*uring, error) {
	var p ioUringParams
	fd, _, e := syscall.Syscall(sysIOUringSetup, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		return nil, fmt.Errorf("%w: io_uring_setup: %w", ErrNoRing, e)
	}
	syscall.CloseOnExec(int(fd))
	r := &uring{fd: int(fd), entries: p.sqEntries}
	mmap := func(off int64, size uint32) ([]byte, error) {
		b, err := syscall.Mmap(r.fd, off, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
		if err != nil {
			return nil, fmt.Errorf("%w: io_uring mmap %#x: %w", ErrNoRing, off, err)
		}
		return b, nil
	}
	var err error
	if r.sq, err = mmap(ioringOffSQRing, p.sqOff.array+p.sqEntries*4); err != nil {
		r.close()
		return nil, err
	}
	if r.cq, err = mmap(ioringOffCQRing, p.cqOff.cqes+p.cqEntries*cqeSize); err != nil {
		r.close()
		return nil, err
	}
	if r.sqes, err = mmap(ioringOffSQEs, p.sqEntries*sqeSize); err != nil {
		r.close()
		return nil, err
	}
	at := func(b []byte, off uint32) unsafe.Pointer { return unsafe.Pointer(&b[off]) }
	r.sqHead, r.sqTail = (*uint32)(at(r.sq, p.sqOff.head)), (*uint32)(at(r.sq, p.sqOff.tail))
	r.sqMask = *(*uint32)(at(r.sq, p.sqOff.ringMask))
	r.sqArray = at(r.sq, p.sqOff.array)
	r.cqHead, r.cqTail = (*uint32)(at(r.cq, p.cqOff.head)), (*uint32)(at(r.cq, p.cqOff.tail))
	r.cqMask = *(*uint32)(at(r.cq, p.cqOff.ringMask))
	r.cqes = at(r.cq, p.cqOff.cqes)
	return r, nil
}

// close unmaps the ring and closes its descriptor.
func (r *uring) close() {
	for _, b := range [][]byte{r.sq, r.cq, r.sqes} {
		if b != nil {
			_ = syscall.Munmap(b)
		}
	}
	r.sq, r.cq, r.sqes = nil, nil, nil
	_ = syscall.Close(r.fd)
}

// sendAll makes the sends ents (at most the ring's entries; each a range
// of buf) in one io_uring_enter and fills in their results. It returns how
// many of ents the ring dealt with and, if the ring failed, why: when the
// kernel took none of the submissions, 0 (the caller sends them another
// way); otherwise all of them, those without a completion failed with EIO
// (sending them again could send them twice). After an error the ring
// must not be used again.
func (r *uring) sendAll(buf []byte, ents []batchEntry) (int, error) {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	tail := atomic.LoadUint32(r.sqTail)
	for i := range ents {
		e := &ents[i]
		idx := (tail + uint32(i)) & r.sqMask
		sqe := unsafe.Pointer(&r.sqes[idx*sqeSize])
		clear(unsafe.Slice((*byte)(sqe), sqeSize))
		*(*uint8)(sqe) = ioringOpSend
		*(*int32)(unsafe.Add(sqe, 4)) = int32(e.fd)
		*(*uint64)(unsafe.Add(sqe, 16)) = uint64(base + uintptr(e.off))
		*(*uint32)(unsafe.Add(sqe, 24)) = e.n
		*(*uint32)(unsafe.Add(sqe, 28)) = syscall.MSG_DONTWAIT | syscall.MSG_NOSIGNAL
		*(*uint64)(unsafe.Add(sqe, 32)) = uint64(i)
		*(*uint32)(unsafe.Add(r.sqArray, 4*uintptr(idx))) = idx
		e.res = -int32(syscall.EIO) // until its completion says otherwise
	}
	atomic.StoreUint32(r.sqTail, tail+uint32(len(ents)))
	k := uintptr(len(ents))
	var err error
	for {
		// Raw: with MSG_DONTWAIT the call never sleeps in the kernel (see
		// sendNonBlocking), so the goroutine keeps its P.
		_, _, e := syscall.RawSyscall6(sysIOUringEnter, uintptr(r.fd), k, k, ioringEnterGetEvents, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			err = fmt.Errorf("io_uring_enter: %w", e)
		}
		break
	}
	runtime.KeepAlive(buf)
	made := 0
	head := atomic.LoadUint32(r.cqHead)
	ctail := atomic.LoadUint32(r.cqTail)
	for ; head != ctail; head++ {
		cqe := unsafe.Add(r.cqes, uintptr(head&r.cqMask)*cqeSize)
		i := *(*uint64)(cqe)
		if i < uint64(len(ents)) {
			ents[i].res = *(*int32)(unsafe.Add(cqe, 8))
			made++
		}
	}
	atomic.StoreUint32(r.cqHead, head)
	if made == len(ents) {
		return made, nil
	}
	if err == nil {
		err = fmt.Errorf("io_uring: %d completions for %d sends", made, len(ents))
	}
	if made == 0 && atomic.LoadUint32(r.sqHead) == tail {
		return 0, err // nothing submitted
	}
	return len(ents), err
}
