// Package rawsock wraps a TCP listener so that the reads and writes on its
// connections (net/http's: request heads and bodies, response heads,
// terminating chunks) are raw system calls on the non-blocking socket
// (syscall.RawSyscall), waiting for readiness in the runtime's poller
// (syscall.RawConn) only when the socket has nothing to give or take.
//
// Why: a plain net.Conn read or write goes through the runtime's
// entersyscall/exitsyscall hooks. When the whole process was idle (every P
// idle: the frontend between two engine steps), the first such call wakes
// the runtime's sysmon thread from its deep sleep and resets its period to
// 20 µs, so it then wakes about 60 times (50 at 20 µs, then doubling) before
// it sleeps deeply again. A frontend that serves short requests wakes it
// every engine step: in the 256-stream split benchmark sysmon's own wake-ups
// were 11 % of the frontend's CPU. A read or write on a non-blocking socket
// never sleeps in the kernel, so keeping the P during it is right (the
// per-token sends in package sse do the same).
package rawsock

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

// Listener returns ln whose accepted *net.TCPConn connections read and
// write with raw system calls (Conn); other connections pass unchanged.
func Listener(ln net.Listener) net.Listener { return listener{ln} }

// listener is Listener's wrapper.
type listener struct{ net.Listener }

// Accept implements net.Listener.
func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		if rc, err := newConn(tc); err == nil {
			return rc, nil
		}
	}
	return c, nil
}

// Conn is a TCP connection whose Read and Write are raw system calls; every
// other method is the *net.TCPConn's (deadlines, Close, CloseWrite,
// SyscallConn, SetWriteBuffer...), on the same socket. Read and Write
// honour the deadlines: they wait in the runtime's poller as net.Conn's do.
// One Read and one Write may run at once, as on a net.Conn.
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn

	// The call in progress on each side, for the callbacks below (made
	// once, so a call allocates nothing).
	rbuf []byte
	rn   int
	rerr error
	rfn  func(fd uintptr) bool
	wbuf []byte
	wn   int
	werr error
	wfn  func(fd uintptr) bool
}

// newConn wraps tc.
func newConn(tc *net.TCPConn) (*Conn, error) {
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil, err
	}
	c := &Conn{TCPConn: tc, rc: rc}
	c.rfn, c.wfn = c.readFD, c.writeFD
	return c, nil
}

// Read implements net.Conn.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rbuf, c.rn, c.rerr = p, 0, nil
	err := c.rc.Read(c.rfn)
	c.rbuf = nil
	if err != nil {
		return 0, c.opError("read", err)
	}
	if c.rerr != nil && c.rerr != io.EOF {
		return c.rn, c.opError("read", c.rerr)
	}
	return c.rn, c.rerr
}

// readFD is the read callback: false asks the poller to wait for data.
func (c *Conn) readFD(fd uintptr) bool {
	p := c.rbuf
	for {
		n, e := rawRead(fd, p)
		switch e {
		case 0:
			c.rn = int(n)
			if n == 0 {
				c.rerr = io.EOF
			}
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			c.rerr = os.NewSyscallError("read", e)
			return true
		}
	}
}

// Write implements net.Conn: it returns once all of p is written, or with
// the error that stopped it.
func (c *Conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.wbuf, c.wn, c.werr = p, 0, nil
	err := c.rc.Write(c.wfn)
	c.wbuf = nil
	if err == nil {
		err = c.werr
	}
	if err != nil {
		return c.wn, c.opError("write", err)
	}
	return c.wn, nil
}

// writeFD is the write callback: it sends what is left of the buffer and
// returns false (wait until writable) when the socket takes no more.
func (c *Conn) writeFD(fd uintptr) bool {
	for c.wn < len(c.wbuf) {
		n, e := rawSend(fd, c.wbuf[c.wn:])
		switch e {
		case 0:
			c.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werr = os.NewSyscallError("write", e)
			return true
		}
	}
	return true
}

// opError wraps err as net.Conn's methods do (a *net.OpError; a deadline
// or a closed connection keeps its net.Error meaning).
func (c *Conn) opError(op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		oe.Op = op // the RawConn's "raw-read"/"raw-write"
		return oe
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// rawRead is read(2) of p on fd through a raw system call (see
// raceEnabled).
func rawRead(fd uintptr, p []byte) (uintptr, syscall.Errno) {
	if raceEnabled {
		n, err := syscall.Read(int(fd), p)
		return uintptr(max(n, 0)), errno(err)
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	runtime.KeepAlive(p)
	return n, e
}

// rawSend is send(2) of p on fd with MSG_DONTWAIT|MSG_NOSIGNAL through a
// raw system call (see raceEnabled).
func rawSend(fd uintptr, p []byte) (uintptr, syscall.Errno) {
	if raceEnabled {
		n, err := syscall.Write(int(fd), p) // the socket is non-blocking; Go ignores SIGPIPE on it
		return uintptr(max(n, 0)), errno(err)
	}
	n, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)),
		syscall.MSG_DONTWAIT|syscall.MSG_NOSIGNAL, 0, 0)
	runtime.KeepAlive(p)
	return n, e
}

// errno is err as a syscall.Errno (0 for nil).
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	return err.(syscall.Errno)
}
