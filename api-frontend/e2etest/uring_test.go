package e2etest

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// sendRing is a minimal io_uring (raw system calls, no library) that
// submits one IORING_OP_SEND per socket with a single io_uring_enter:
// BenchmarkSendFloor's uring mode, which asks whether batching an engine
// step's sends into one system call lowers the per-send floor.
type sendRing struct {
	fd             int
	sq, cq, sqes   []byte
	sqTail         *uint32
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

// newSendRing sets up a ring of at least entries submissions.
func newSendRing(entries uint32) (*sendRing, error) {
	var p ioUringParams
	fd, _, e := syscall.Syscall(sysIOUringSetup, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", e)
	}
	r := &sendRing{fd: int(fd), entries: p.sqEntries}
	mmap := func(off int64, size uint32) ([]byte, error) {
		b, err := syscall.Mmap(r.fd, off, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
		if err != nil {
			return nil, fmt.Errorf("io_uring mmap %#x: %w", off, err)
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
	r.sqTail = (*uint32)(at(r.sq, p.sqOff.tail))
	r.sqMask = *(*uint32)(at(r.sq, p.sqOff.ringMask))
	r.sqArray = at(r.sq, p.sqOff.array)
	r.cqHead, r.cqTail = (*uint32)(at(r.cq, p.cqOff.head)), (*uint32)(at(r.cq, p.cqOff.tail))
	r.cqMask = *(*uint32)(at(r.cq, p.cqOff.ringMask))
	r.cqes = at(r.cq, p.cqOff.cqes)
	return r, nil
}

// close unmaps the ring and closes its descriptor.
func (r *sendRing) close() {
	for _, b := range [][]byte{r.sq, r.cq, r.sqes} {
		if b != nil {
			_ = syscall.Munmap(b)
		}
	}
	_ = syscall.Close(r.fd)
}

// sendAll sends n bytes at p to every descriptor in fds (at most the
// ring's entries) with MSG_DONTWAIT|MSG_NOSIGNAL in one io_uring_enter,
// waits for every completion, and returns how many sends failed with
// anything but EAGAIN (the first such error in err).
func (r *sendRing) sendAll(fds []int, p uintptr, n uint32) (failed int, err error) {
	tail := atomic.LoadUint32(r.sqTail)
	for i, fd := range fds {
		idx := (tail + uint32(i)) & r.sqMask
		sqe := unsafe.Pointer(&r.sqes[idx*sqeSize])
		clear(unsafe.Slice((*byte)(sqe), sqeSize))
		*(*uint8)(sqe) = ioringOpSend
		*(*int32)(unsafe.Add(sqe, 4)) = int32(fd)
		*(*uint64)(unsafe.Add(sqe, 16)) = uint64(p)
		*(*uint32)(unsafe.Add(sqe, 24)) = n
		*(*uint32)(unsafe.Add(sqe, 28)) = syscall.MSG_DONTWAIT | syscall.MSG_NOSIGNAL
		*(*uint64)(unsafe.Add(sqe, 32)) = uint64(i)
		*(*uint32)(unsafe.Add(r.sqArray, 4*uintptr(idx))) = idx
	}
	atomic.StoreUint32(r.sqTail, tail+uint32(len(fds)))
	k := uintptr(len(fds))
	for {
		_, _, e := syscall.RawSyscall6(sysIOUringEnter, uintptr(r.fd), k, k, ioringEnterGetEvents, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return len(fds), fmt.Errorf("io_uring_enter: %w", e)
		}
		break
	}
	head := atomic.LoadUint32(r.cqHead)
	ctail := atomic.LoadUint32(r.cqTail)
	if ctail-head != uint32(len(fds)) {
		return len(fds), fmt.Errorf("io_uring: %d completions for %d sends", ctail-head, len(fds))
	}
	for ; head != ctail; head++ {
		res := *(*int32)(unsafe.Add(r.cqes, uintptr(head&r.cqMask)*cqeSize+8))
		if res < 0 && syscall.Errno(-res) != syscall.EAGAIN {
			failed++
			if err == nil {
				err = syscall.Errno(-res)
			}
		}
	}
	atomic.StoreUint32(r.cqHead, head)
	return failed, err
}
