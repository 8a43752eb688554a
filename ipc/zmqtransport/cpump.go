//go:build unix

package zmqtransport

/*
#cgo pkg-config: libzmq
#cgo CFLAGS: -O2 -pthread
#cgo LDFLAGS: -pthread
#include <stdlib.h>
#include "cpump.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	zmq "github.com/pebbe/zmq4"
)

// cPump is an EngineConn's socket pump: a C thread (cpump.c) that owns the
// DEALER and its monitor, receives every message into a ring of slots in C
// memory and sends what Go appends to a byte ring, waking Go through a pipe
// in the network poller and woken by Go through another.
//
// Why a C thread: Go's runtime parks its sysmon thread while every P is
// idle, and the first cgo call (or syscall) after that wakes it and resets
// it to polling every 20 µs for a millisecond or more. The frontend is idle
// between engine steps, so receiving each step's batch with zmq calls from Go
// cost about 30 sysmon wake-ups per step, which also preempted the thread
// writing the streams: about 5% of the frontend's CPU at 1024 streams.
// Through the pump, receiving a batch and sending a request take no cgo
// call: Go reads the slots and writes the ring with plain memory accesses and
// atomics, and pokes the pipes with raw syscalls (RawSyscall: no
// entersyscall). Only Dial and Close, and a frame over a quarter of the ring,
// call C.
//
// The shared counters are read and written with sync/atomic on C memory (C
// uses __atomic builtins): Go owns in_tail and out_head, C owns in_head and
// out_tail.
type cPump struct {
	p     *C.sl_pump
	slots *[C.SL_SLOTS]C.sl_slot
	tail  uint64 // in_tail, Go's copy (the I/O goroutine's)

	wakeFd int
	w      *pipeWaiter // notify_r (a dup) in the network poller

	outMu   sync.Mutex // the senders'
	out     []byte     // the Go → C ring (C memory)
	outHead uint64     // out_head, Go's copy
	closed  bool
}

// pumpConfig is what the C side needs to create and connect the sockets.
type pumpConfig struct {
	addr, identity, monitorAddr     string
	curveServer, curvePub, curveSec string // Z85; empty: no CURVE
	outCap                          int
}

// defaultOutCap is the Go → C ring's size (C memory, touched as it wraps):
// a frame over a quarter of it (a prompt of over 64k tokens) goes through C
// memory of its own.
const defaultOutCap = 1 << 20

// newCPump creates the sockets, connects and starts the pump thread.
func newCPump(cfg pumpConfig) (*cPump, error) {
	var cs []*C.char
	str := func(s string) *C.char {
		if s == "" {
			return nil
		}
		p := C.CString(s)
		cs = append(cs, p)
		return p
	}
	defer func() {
		for _, p := range cs {
			C.free(unsafe.Pointer(p))
		}
	}()
	ccfg := C.sl_config{
		addr: str(cfg.addr), identity: str(cfg.identity), identity_len: C.int(len(cfg.identity)),
		monitor_addr: str(cfg.monitorAddr), out_cap: C.uint64_t(cfg.outCap),
	}
	if cfg.curveServer != "" {
		ccfg.curve_server, ccfg.curve_public, ccfg.curve_secret = str(cfg.curveServer), str(cfg.curvePub), str(cfg.curveSec)
	}
	var errBuf [256]C.char
	p := C.sl_pump_new(&ccfg, &errBuf[0], C.int(len(errBuf)))
	if p == nil {
		return nil, errors.New(C.GoString(&errBuf[0]))
	}
	c := &cPump{p: p, slots: (*[C.SL_SLOTS]C.sl_slot)(unsafe.Pointer(&p.in[0])), wakeFd: int(p.wake_w),
		out: unsafe.Slice((*byte)(unsafe.Pointer(p.out)), cfg.outCap)}
	w, err := newPipeWaiter(int(p.notify_r))
	if err != nil {
		C.sl_pump_free(p)
		return nil, err
	}
	c.w = w
	return c, nil
}

func (c *cPump) u64(p *C.uint64_t) *uint64 { return (*uint64)(unsafe.Pointer(p)) }
func (c *cPump) u32(p *C.uint32_t) *uint32 { return (*uint32)(unsafe.Pointer(p)) }

// poke wakes the pump thread. A full pipe (EAGAIN) means it is awake anyway.
func (c *cPump) poke() {
	var b [1]byte = [1]byte{1}
	for {
		_, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(c.wakeFd), uintptr(unsafe.Pointer(&b[0])), 1)
		if e != syscall.EINTR {
			return
		}
	}
}

// What the pump thread hands Go besides frames.
const (
	pumpFrame        = C.SL_FRAME
	pumpDisconnected = C.SL_DISCONNECTED // the monitor saw the connection drop
	pumpSendFailed   = C.SL_SENDFAIL     // a send with report failed
)

// pumpEvent is a slot that is not a frame.
type pumpEvent struct {
	kind int
	err  error // pumpSendFailed: why
}

// next returns the next slot: a frame (kind pumpFrame; view is its bytes in
// C memory, valid until release) or an event; ok is false when there is
// none. The caller releases every slot next returned, before the next call.
// The I/O goroutine's.
func (c *cPump) next() (ev pumpEvent, view []byte, ok bool) {
	if c.tail == atomic.LoadUint64(c.u64(&c.p.in_head)) {
		return pumpEvent{}, nil, false
	}
	s := &c.slots[c.tail&(C.SL_SLOTS-1)]
	ev.kind = int(s.kind)
	switch ev.kind {
	case pumpFrame:
		if s.size > 0 {
			view = unsafe.Slice((*byte)(s.data), int(s.size))
		}
	case pumpSendFailed:
		ev.err = zmq.Errno(s.err)
	}
	return ev, view, true
}

// release gives the slot next returned back to the pump thread, which then
// frees its message: a view of it must not be used afterwards.
func (c *cPump) release() {
	c.tail++
	atomic.StoreUint64(c.u64(&c.p.in_tail), c.tail)
	if atomic.LoadUint32(c.u32(&c.p.in_full)) != 0 {
		c.poke()
	}
}

// errPumpClosed is returned by send after close.
var errPumpClosed = errors.New("zmqtransport: connection closed")

// send appends frame to the Go → C ring and wakes the pump thread, which
// sends it without waiting (DONTWAIT); with report, a failed send comes
// back as a SL_SENDFAIL slot. A full ring (the thread is behind by a whole ring)
// makes send wait for room.
func (c *cPump) send(frame []byte, report bool) error {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if c.closed {
		return errPumpClosed
	}
	flags := uint32(0)
	if report {
		flags |= C.SL_OUT_REPORT
	}
	payload := frame
	var ptrRec [16]byte
	var owned unsafe.Pointer
	if len(frame) > len(c.out)/4 {
		owned = C.sl_malloc_copy(unsafe.Pointer(&frame[0]), C.uint64_t(len(frame)))
		if owned == nil {
			return fmt.Errorf("zmqtransport: no memory for a %d-byte frame", len(frame))
		}
		*(*uintptr)(unsafe.Pointer(&ptrRec[0])) = uintptr(owned)
		*(*uint64)(unsafe.Pointer(&ptrRec[8])) = uint64(len(frame))
		payload = ptrRec[:]
		flags |= C.SL_OUT_POINTER
	}
	capacity := uint64(len(c.out))
	need := 8 + (uint64(len(payload))+7)&^7
	for {
		tail := atomic.LoadUint64(c.u64(&c.p.out_tail))
		pos := c.outHead % capacity
		pad := uint64(0)
		if capacity-pos < need {
			pad = capacity - pos
		}
		if capacity-(c.outHead-tail) >= pad+need {
			break
		}
		c.poke()
		c.outMu.Unlock()
		time.Sleep(50 * time.Microsecond)
		c.outMu.Lock()
		if c.closed {
			C.free(owned)
			return errPumpClosed
		}
	}
	pos := c.outHead % capacity
	if capacity-pos < need {
		*(*uint32)(unsafe.Pointer(&c.out[pos])) = C.SL_OUT_WRAP
		c.outHead += capacity - pos
		pos = 0
	}
	*(*uint32)(unsafe.Pointer(&c.out[pos])) = uint32(len(payload))
	*(*uint32)(unsafe.Pointer(&c.out[pos+4])) = flags
	copy(c.out[pos+8:], payload)
	c.outHead += need
	atomic.StoreUint64(c.u64(&c.p.out_head), c.outHead)
	runtime.KeepAlive(frame)
	c.poke()
	return nil
}

// close stops the thread and releases the sockets, the context and the
// rings; the I/O goroutine calls it last.
func (c *cPump) close() {
	c.outMu.Lock()
	c.closed = true
	c.outMu.Unlock()
	c.w.close()
	C.sl_pump_free(c.p)
	c.p, c.slots, c.out = nil, nil, nil
}

// pipeWaiter signals C when the pump's notify pipe is readable, draining
// it: the descriptor (a dup; the pump closes its own) waits in Go's network
// poller and is read with raw syscalls, so a wake-up takes no cgo call.
type pipeWaiter struct {
	C    chan struct{}
	f    *os.File
	done chan struct{}
}

func newPipeWaiter(fd int) (*pipeWaiter, error) {
	dup, err := dupFd(fd)
	if err != nil {
		return nil, fmt.Errorf("dup pump pipe: %w", err)
	}
	f := os.NewFile(uintptr(dup), "zmq-pump")
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return nil, fmt.Errorf("pump pipe not pollable: %w", err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	w := &pipeWaiter{C: make(chan struct{}, 1), f: f, done: make(chan struct{})}
	go w.run(rc)
	return w, nil
}

func (w *pipeWaiter) run(rc syscall.RawConn) {
	defer close(w.done)
	var buf [64]byte
	drain := func(fd uintptr) bool {
		got := false
		for {
			n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
			switch {
			case e == syscall.EINTR:
				continue
			case e != 0 || n == 0:
				return got // EAGAIN: empty (wait if nothing was read)
			}
			got = true
		}
	}
	for {
		if err := rc.Read(drain); err != nil {
			return // closed
		}
		select {
		case w.C <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

func (w *pipeWaiter) close() {
	w.f.Close()
	<-w.done
}
