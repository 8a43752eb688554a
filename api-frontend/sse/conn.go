// Package sse is the socket end of a streamed response: one Conn per
// HTTP request, which sends Server-Sent Events bytes to the client. On
// HTTP/1.1 it takes the connection over (http.Hijacker) and sends each
// chunk, framed in place, with one send(2) (TryWrite: MSG_DONTWAIT, no
// runtime hooks); otherwise it writes through the ResponseWriter. Callers
// see only Conn; the measured tricks stay here.
//
// Buffers: a stream's bytes are rendered after Headroom free bytes, where
// Frame writes the HTTP/1.1 chunk-size line, so a chunk needs no copy.
// GetBuf and PutBuf recycle such buffers.
package sse

import (
	"context"
	"errors"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Headroom is the space kept free at the start of every stream buffer,
// where Frame puts the HTTP/1.1 chunk-size line, so that a chunk goes to
// the socket with one write and no copy.
const Headroom = 10

// bufPool recycles stream buffers (each starts with Headroom bytes).
var bufPool = sync.Pool{New: func() any { b := make([]byte, Headroom, 4096); return &b }}

// GetBuf returns a pooled buffer holding Headroom bytes.
func GetBuf() *[]byte {
	b := bufPool.Get().(*[]byte)
	*b = (*b)[:Headroom]
	return b
}

// PutBuf returns b to the pool (huge buffers are dropped).
func PutBuf(b *[]byte) {
	if cap(*b) > 1<<20 {
		return // do not keep huge buffers
	}
	bufPool.Put(b)
}

// ErrNoDirect is returned by TryWrite on a Conn that cannot write without
// blocking (the ResponseWriter fallback).
var ErrNoDirect = errors.New("sse: no non-blocking write on this connection")

// Conn sends one response's SSE bytes. Write, WriteRaw and TryWrite must
// not be called concurrently (the stream's writer rule decides who
// calls); Abort may be called from any goroutine.
type Conn interface {
	// Write sends (*buf)[Headroom:] as one chunk, blocking; the headroom
	// may be overwritten and buf may grow by a few bytes of framing. last
	// ends the response (on a kept connection its bytes then leave with
	// net/http's terminating chunk, once the handler returns).
	Write(buf *[]byte, last bool) error
	// WriteRaw sends bytes already framed (by Frame), blocking.
	WriteRaw(b []byte) error
	// Direct reports whether TryWrite works on this Conn.
	Direct() bool
	// TryWrite sends framed bytes without blocking and returns how many
	// the socket took (syscall.EAGAIN when none; ErrNoDirect when the
	// Conn has no such path).
	TryWrite(b []byte) (int, error)
	// Sender returns a value that does what TryWrite does, for a caller
	// that keeps it beside its own per-stream state (no pointer to follow
	// per chunk). It is valid until Close.
	Sender() Sender
	// Abort makes pending and later writes fail at once: the stream gives
	// up on a client that does not read.
	Abort()
	// Close releases the connection.
	Close()
	// Gone is closed when the client has gone away (for a request on a
	// connection net/http keeps, the request context's Done). The caller
	// selects on it with its own wake-ups: no callback to register and
	// unregister per request.
	Gone() <-chan struct{}
}

// Frame turns buf (payload after Headroom) into one HTTP/1.1
// chunk in place, adding the terminating chunk when last, and returns the
// bytes to send ("" when there is nothing).
func Frame(buf *[]byte, last bool) []byte {
	b := *buf
	n := len(b) - Headroom
	start := Headroom
	if n > 0 {
		var hex [16]byte
		hx := strconv.AppendInt(hex[:0], int64(n), 16)
		hx = append(hx, '\r', '\n')
		start = Headroom - len(hx)
		copy(b[start:], hx)
		b = append(b, '\r', '\n')
	}
	if last {
		b = append(b, "0\r\n\r\n"...)
	}
	*buf = b
	return b[start:]
}

// connKey is the request-context key under which ConnContext keeps the
// connection's keptSSE.
type connKey struct{}

// ConnContext is an http.Server ConnContext hook: it keeps each
// connection in its requests' contexts, so that Start can send a stream's
// chunks to its socket directly and still leave the connection to net/http
// (kept alive) once the response ends. The connection's socket is looked
// up here, once, and its keptSSE serves every stream on it in turn
// (net/http serves a connection's requests one after another).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if k := newKept(c); k != nil {
		return context.WithValue(ctx, connKey{}, k)
	}
	return ctx
}

// Start sends the response head and returns the stream's Conn. On
// HTTP/1.1 its SSE frames go to the socket with one send each, skipping
// net/http's buffering, chunk formatting and copies (the largest frontend
// cost per token after the send syscall itself): when the server's
// ConnContext is this package's, net/http writes the head and, once the
// handler returns, the last chunk, and keeps the connection alive for the
// client's next request; otherwise the connection is taken over
// (http.Hijacker) and closed at the end. The Conn's Gone is closed if the
// client disconnects. Without either, it falls back to the ResponseWriter.
func Start(w http.ResponseWriter, req *http.Request, sndBuf int) (Conn, error) {
	http11 := req.ProtoMajor == 1 && req.ProtoMinor == 1
	if k, ok := req.Context().Value(connKey{}).(*keptSSE); ok && http11 {
		if tc, ok := k.conn.(interface{ SetWriteBuffer(int) error }); ok && sndBuf > 0 {
			_ = tc.SetWriteBuffer(sndBuf)
		}
		return k.start(w, req)
	}
	if http11 && canHijack(w) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if brw != nil && brw.Writer.Buffered() > 0 {
				_ = brw.Writer.Flush()
			}
			if tc, ok := conn.(interface{ SetWriteBuffer(int) error }); ok && sndBuf > 0 {
				_ = tc.SetWriteBuffer(sndBuf)
			}
			h := newHijacked(conn)
			head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n" +
				"Date: " + time.Now().UTC().Format(http.TimeFormat) + "\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
			if _, err := conn.Write([]byte(head)); err != nil {
				_ = conn.Close()
				return nil, err
			}
			h.gone = make(chan struct{})
			go h.watch()
			return h, nil
		}
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	return &plainSSE{w: w, rc: rc, gone: req.Context().Done()}, nil
}

// FromConn returns a Conn that writes already-sent-head SSE chunks to c
// (a taken-over connection), with the non-blocking path when c exposes its
// descriptor. The server's benchmarks use it; Start uses it after Hijack.
func FromConn(c net.Conn) Conn { return newHijacked(c) }

func newHijacked(conn net.Conn) *hijackedSSE {
	h := &hijackedSSE{conn: conn, fd: -1}
	if sc, ok := conn.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			h.rc = rc
			_ = rc.Control(func(fd uintptr) { h.fd = int(fd) })
		}
	}
	return h
}

// Sender sends framed bytes without blocking; see Conn.Sender. Its zero
// value (and a Conn without a non-blocking path) fails with ErrNoDirect.
type Sender struct {
	fd int          // the socket when > 0 (raw send(2))
	h  *hijackedSSE // otherwise, when set
	// kept: net/http writes the terminating chunk (keptSSE), so Frame
	// leaves it out.
	kept bool
	// corked: the response head waits in the corked socket (keptSSE);
	// the first TrySend uncorks it, so head and chunk leave together.
	corked bool
	// held: the response head waits in user space (keptSSE.held); the
	// first TrySend sends it with the chunk, in one send.
	held bool
	k    *keptSSE // for uncorking or the held head; read only while corked or held
}

// Frame is the package's Frame for this Sender's connection: the
// terminating chunk is added when last only where the stream, not
// net/http, ends the response.
func (s Sender) Frame(buf *[]byte, last bool) []byte {
	return Frame(buf, last && !s.kept)
}

// DirectEnd reports whether a stream's final bytes may go out through
// TrySend. On a kept connection they may not: Conn.Write(buf, true) leaves
// them in net/http's buffer, which sends them with its terminating chunk
// once the handler returns, one send for both.
func (s Sender) DirectEnd() bool { return !s.kept }

// Queue adds b (framed) to bt as this Sender's next send instead of
// sending it, and returns its index in bt: a response head held in user
// space goes first in the same send (and is no longer held; what the
// socket does not take of either is the caller's to write). It reports
// false, queueing nothing, where the chunk must go through TrySend: no
// descriptor, or the head waits in the corked socket. Queue at most one
// send per Sender per flush.
func (s *Sender) Queue(bt *Batch, b []byte) (int, bool) {
	if s.fd <= 0 || s.corked {
		return 0, false
	}
	if s.held {
		s.held = false
		if k := s.k; len(k.held) > 0 {
			i := bt.AddTwo(s.fd, k.held, b)
			if k.inBuf {
				k.hb.DropBuffered() // copied: the server must not send it
			}
			k.letGo()
			return i, true
		}
	}
	return bt.Add(s.fd, b), true
}

// TrySend is Conn.TryWrite.
func (s *Sender) TrySend(b []byte) (int, error) {
	switch {
	case s.fd > 0:
		if s.held {
			s.held = false
			return s.k.sendHeld(b)
		}
		n, err := sendNonBlocking(s.fd, b)
		if s.corked {
			s.corked = false
			s.k.uncork()
		}
		return n, err
	case s.h != nil:
		return s.h.TryWrite(b)
	}
	return 0, ErrNoDirect
}

// Sender implements Conn.
func (h *hijackedSSE) Sender() Sender {
	if h.fd > 0 {
		return Sender{fd: h.fd}
	}
	return Sender{h: h}
}

// Sender implements Conn: no non-blocking path.
func (p *plainSSE) Sender() Sender { return Sender{} }

// canHijack reports whether the writer under w (gin's, say) can be
// hijacked (gin's own Hijack panics when it cannot).
func canHijack(rw http.ResponseWriter) bool {
	for {
		u, ok := rw.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			_, ok := rw.(http.Hijacker)
			return ok
		}
		rw = u.Unwrap()
	}
}

// hijackedSSE writes HTTP/1.1 chunked frames straight to the connection.
type hijackedSSE struct {
	conn net.Conn
	rc   syscall.RawConn // for non-blocking writes; nil if unavailable
	// fd is the socket (non-blocking, as the runtime's poller sets every
	// socket) for the raw sends of tryWrite and writeRaw; -1 if unavailable. It stays valid
	// until close, which the stream calls only after detaching the writer
	// from its request (r.direct = nil under r.mu).
	fd   int
	gone chan struct{} // closed by watch when the client goes (Start's)
}

// Write implements Conn.
func (h *hijackedSSE) Write(buf *[]byte, last bool) error {
	return h.WriteRaw(Frame(buf, last))
}

// WriteRaw implements Conn.
func (h *hijackedSSE) WriteRaw(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if h.fd >= 0 {
		// Usually the socket takes it all at once: skip net.Conn's
		// poller bookkeeping and syscall hooks as tryWrite does, and
		// wait through the poller only for what is left.
		n, err := sendNonBlocking(h.fd, b)
		if err != nil && err != syscall.EAGAIN {
			return err
		}
		if b = b[max(n, 0):]; len(b) == 0 {
			return nil
		}
	}
	_, err := h.conn.Write(b)
	return err
}

// Direct implements Conn.
func (h *hijackedSSE) Direct() bool { return h.fd >= 0 || h.rc != nil }

// TryWrite implements Conn: it writes b without waiting: it returns how much the socket took
// (syscall.EAGAIN when none).
//
// It is the one syscall per streamed token, so it goes straight to
// send(2) with MSG_DONTWAIT: no poll.FD lock and poller reset, no
// entersyscall/exitsyscall (RawSyscall), and none of write(2)'s VFS work
// (fdget_pos, rw_verify_area, fsnotify). MSG_NOSIGNAL turns a closed peer
// into EPIPE without a SIGPIPE. Besides their own cost, the runtime's
// syscall hooks let sysmon hand the P of a write that took more than
// 20 µs (a preempted vCPU) to another thread, and then poll every 20 µs.
// A MSG_DONTWAIT send never sleeps, so keeping the P is right.
// BenchmarkLoopbackWriteFloor (api-frontend/e2etest) compares the ways.
func (h *hijackedSSE) TryWrite(b []byte) (int, error) {
	if h.fd < 0 {
		if h.rc == nil {
			return 0, ErrNoDirect
		}
		return h.tryWriteRC(b)
	}
	return sendNonBlocking(h.fd, b)
}

// sendNonBlocking is tryWrite on the socket fd.
func sendNonBlocking(fd int, b []byte) (int, error) {
	n, e := sendRaw(fd, b)
	if e != 0 {
		return 0, e
	}
	return n, nil
}

// sendRaw is sendNonBlocking with the error as an Errno (0: none), which
// a caller can keep without boxing it.
func sendRaw(fd int, b []byte) (int, syscall.Errno) {
	if len(b) == 0 {
		return 0, 0
	}
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
			syscall.MSG_DONTWAIT|syscall.MSG_NOSIGNAL, 0, 0)
		runtime.KeepAlive(b)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), 0
	}
}

// tryWriteRC is tryWrite through the RawConn (no descriptor was known).
func (h *hijackedSSE) tryWriteRC(b []byte) (int, error) {
	var n int
	var werr error
	err := h.rc.Write(func(fd uintptr) bool {
		for {
			n, werr = syscall.Write(int(fd), b)
			if werr != syscall.EINTR {
				return true
			}
		}
	})
	if err != nil {
		return 0, err
	}
	return n, werr
}

// Abort implements Conn: a write deadline in the past fails a blocked
// conn.Write at once; raw sends fail once close shuts the socket.
func (h *hijackedSSE) Abort() { _ = h.conn.SetWriteDeadline(time.Unix(1, 0)) }

// Close implements Conn.
func (h *hijackedSSE) Close() { _ = h.conn.Close() }

// watch reads until the client closes the connection (or close is called)
// and then reports the client gone; a streaming client sends nothing more.
func (h *hijackedSSE) watch() {
	var b [512]byte
	for {
		if _, err := h.conn.Read(b[:]); err != nil {
			close(h.gone)
			return
		}
	}
}

// Gone implements Conn (nil, never closed, for a Conn from FromConn).
func (h *hijackedSSE) Gone() <-chan struct{} { return h.gone }

// plainSSE writes through the ResponseWriter (HTTP/2, or no hijacking).
type plainSSE struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	gone <-chan struct{} // the request context's Done
}

// Write implements Conn.
func (p *plainSSE) Write(buf *[]byte, last bool) error {
	b := (*buf)[Headroom:]
	if len(b) == 0 {
		return nil
	}
	return p.WriteRaw(b)
}

// WriteRaw implements Conn.
func (p *plainSSE) WriteRaw(b []byte) error {
	if _, err := p.w.Write(b); err != nil {
		return err
	}
	return p.rc.Flush()
}

// Direct implements Conn: the ResponseWriter has no non-blocking path.
func (p *plainSSE) Direct() bool { return false }

// TryWrite implements Conn.
func (p *plainSSE) TryWrite([]byte) (int, error) { return 0, ErrNoDirect }

// Abort implements Conn.
func (p *plainSSE) Abort() { _ = p.rc.SetWriteDeadline(time.Unix(1, 0)) }

// Close implements Conn.
func (p *plainSSE) Close() {}

// Gone implements Conn.
func (p *plainSSE) Gone() <-chan struct{} { return p.gone }

// headBuffer is the server's ResponseWriter when it can hold a response
// head in its connection's buffer for the handler to send (httpserve's).
type headBuffer interface {
	// BufferHead puts the head into the connection's buffer, unsent,
	// and returns a copy (nil when it had to send it).
	BufferHead() ([]byte, error)
	// DropBuffered discards the buffer: the caller sent the head.
	DropBuffered()
}

// findHeadBuffer returns the headBuffer under w (gin's writer wraps it),
// or nil.
func findHeadBuffer(w http.ResponseWriter) headBuffer {
	for {
		if hb, ok := w.(headBuffer); ok {
			return hb
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
}

// headWait is how long a held head waits for the first chunk before it
// is sent alone: the kernel's limit for a corked socket, which the other
// servers' heads wait under.
const headWait = 200 * time.Millisecond

// keptSSE sends a response's chunks straight to the socket of a connection
// that net/http keeps: net/http wrote the head (chunked) and writes the
// terminating chunk after the handler returns, then reads the client's
// next request from the same connection. Between the two, net/http does
// not write to the connection, so the stream's sends are the only ones.
//
// The head waits in the socket for the first chunk: start corks the
// socket (TCP_CORK) before net/http flushes the head, and the first send
// of a chunk uncorks it, so that head and chunk leave in one segment (one
// transmit, one wake-up of the client) instead of two. The kernel sends a
// corked head by itself after at most 200 ms, so a client still sees the
// head that soon when the first token is slow.
//
// On a server whose ResponseWriter is a headBuffer (httpserve), the head
// is not corked but held: it stays in the connection's buffer and in held,
// the first chunk's send takes it along (one sendmsg: no cork, no
// uncork, no separate write of the head), and a stream that ends before
// any chunk leaves it to the server, which sends it with the end. When no
// chunk came within headWait, HeadDue fires and the stream's handler sends
// the head alone (WriteRaw(nil)).
//
// There is one per connection (ConnContext), serving its requests' streams
// in turn: start sets the per-request fields (w, gone, corked), and the
// stream lets go of it (Close, and its Sender cleared) before its handler
// returns, so before net/http reads the next request.
type keptSSE struct {
	w    http.ResponseWriter // the stream's end (see Write)
	conn net.Conn            // for blocking writes and Abort
	fd   int                 // the socket (non-blocking, as the runtime's poller sets every socket)
	gone <-chan struct{}     // the request context's Done
	// corked: TCP_CORK is set on fd; whoever sends first clears it.
	corked atomic.Bool

	// The held head (see above), used by whoever writes under the
	// stream's writer rule.
	hb    headBuffer
	held  []byte // the head's bytes not yet sent
	inBuf bool   // held is all of the head and still in hb's buffer
	due   chan struct{}
	timer *time.Timer // fills due after headWait
}

// holdHead holds the head that hb buffered; false when the server sent it
// (too large to hold).
func (k *keptSSE) holdHead(hb headBuffer) (bool, error) {
	head, err := hb.BufferHead()
	if err != nil || len(head) == 0 {
		return false, err
	}
	k.hb, k.held, k.inBuf = hb, head, true
	if k.timer == nil {
		k.due = make(chan struct{}, 1)
		k.timer = time.AfterFunc(headWait, func() {
			select {
			case k.due <- struct{}{}:
			default:
			}
		})
		return true, nil
	}
	select {
	case <-k.due: // a late one from the last request
	default:
	}
	k.timer.Reset(headWait)
	return true, nil
}

// sendHeld sends the held head and then b without blocking, and returns
// how much of b went (syscall.EAGAIN, and 0, while any of the head is
// left).
func (k *keptSSE) sendHeld(b []byte) (int, error) {
	if len(k.held) == 0 {
		return sendNonBlocking(k.fd, b)
	}
	n, err := sendTwo(k.fd, k.held, b)
	if n <= 0 {
		if err == nil {
			err = syscall.EAGAIN
		}
		return 0, err
	}
	if k.inBuf {
		k.hb.DropBuffered()
		k.inBuf = false
	}
	if n < len(k.held) {
		k.held = k.held[n:]
		return 0, syscall.EAGAIN
	}
	n -= len(k.held)
	k.letGo()
	return n, nil
}

// flushHeld sends what is left of the held head, blocking.
func (k *keptSSE) flushHeld() error {
	if len(k.held) == 0 {
		return nil
	}
	if k.inBuf {
		k.hb.DropBuffered()
		k.inBuf = false
	}
	n, err := sendNonBlocking(k.fd, k.held)
	if err != nil && err != syscall.EAGAIN {
		return err
	}
	if rest := k.held[max(n, 0):]; len(rest) > 0 {
		if _, err := k.conn.Write(rest); err != nil {
			return err
		}
	}
	k.letGo()
	return nil
}

// letGo forgets the held head (sent, or left to the server).
func (k *keptSSE) letGo() {
	k.held, k.inBuf = nil, false
	if k.timer != nil {
		k.timer.Stop()
	}
}

// HeadDue receives when a held head has waited headWait
// for the first chunk (nil on a connection that never held one).
func (k *keptSSE) HeadDue() <-chan struct{} { return k.due }

// sendTwo sends a and then b with one non-blocking sendmsg(2) (see
// sendNonBlocking) and returns how many bytes went.
func sendTwo(fd int, a, b []byte) (int, error) {
	var iov [2]syscall.Iovec
	iov[0].Base = &a[0]
	iov[0].SetLen(len(a))
	msg := syscall.Msghdr{Iov: &iov[0]}
	msg.Iovlen = 1
	if len(b) > 0 {
		iov[1].Base = &b[0]
		iov[1].SetLen(len(b))
		msg.Iovlen = 2
	}
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)),
			syscall.MSG_DONTWAIT|syscall.MSG_NOSIGNAL)
		runtime.KeepAlive(a)
		runtime.KeepAlive(b)
		switch e {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		default:
			return 0, e
		}
	}
}

// uncork clears TCP_CORK once, sending what the socket holds (the head,
// and the chunk just sent after it).
func (k *keptSSE) uncork() {
	if k.corked.CompareAndSwap(true, false) {
		_ = setCork(k.fd, 0)
	}
}

// setCork sets TCP_CORK on fd to on (0 or 1) with a raw system call: no
// entersyscall, which would wake the runtime's sysmon thread from its deep
// sleep when the process was idle (see package rawsock), and the uncork,
// which transmits, is one of the request's longer calls.
func setCork(fd int, on int32) error {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_SETSOCKOPT, uintptr(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK,
		uintptr(unsafe.Pointer(&on)), 4, 0); e != 0 {
		return e
	}
	return nil
}

// newKept returns a keptSSE for c, or nil when c has no socket descriptor
// to send on (TLS, a pipe).
func newKept(c net.Conn) *keptSSE {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	fd := -1
	if rc.Control(func(f uintptr) { fd = int(f) }) != nil || fd < 0 {
		return nil
	}
	return &keptSSE{conn: c, fd: fd}
}

// The SSE response head's values, shared by every stream's header map:
// net/http copies a header when it writes it, and Add appends to a full
// slice by copying, so no one writes into these.
var (
	eventStream = []string{"text/event-stream"}
	noCache     = []string{"no-cache"}
	no          = []string{"no"}
)

// start sends the head through net/http (chunked transfer encoding) for a
// new request on the connection; Gone is the request context's Done, which
// net/http closes when the client goes away.
func (k *keptSSE) start(w http.ResponseWriter, req *http.Request) (Conn, error) {
	hd := w.Header()
	hd["Content-Type"] = eventStream
	hd["Cache-Control"] = noCache
	hd["X-Accel-Buffering"] = no
	w.WriteHeader(http.StatusOK)
	k.w = w
	k.gone = req.Context().Done()
	if hb := findHeadBuffer(w); hb != nil {
		if now, ok := w.(interface{ WriteHeaderNow() }); ok {
			now.WriteHeaderNow() // gin's writer passes the status on
		}
		if _, err := k.holdHead(hb); err != nil {
			return nil, err
		}
		return k, nil
	}
	k.corked.Store(false)
	if setCork(k.fd, 1) == nil {
		k.corked.Store(true)
	}
	if err := http.NewResponseController(w).Flush(); err != nil {
		k.uncork()
		return nil, err
	}
	return k, nil
}

// Write implements Conn; the terminating chunk is net/http's. The last
// bytes go into net/http's buffer unsent: when the handler returns,
// net/http frames them and sends them with its terminating chunk in one
// write (the stream has sent everything before them).
func (k *keptSSE) Write(buf *[]byte, last bool) error {
	if last {
		k.uncork() // net/http's write of the end must not wait
		if k.inBuf {
			k.letGo() // the server sends the head with the end
		} else if err := k.flushHeld(); err != nil {
			return err
		}
		if b := (*buf)[Headroom:]; len(b) > 0 {
			_, err := k.w.Write(b)
			return err
		}
		return nil
	}
	return k.WriteRaw(Frame(buf, false))
}

// WriteRaw implements Conn: a non-blocking send, then the connection's
// blocking write for what the socket did not take. A held head goes
// first (with b empty: alone).
func (k *keptSSE) WriteRaw(b []byte) error {
	if len(k.held) > 0 {
		n, err := k.sendHeld(b)
		if err != nil && err != syscall.EAGAIN {
			return err
		}
		if err := k.flushHeld(); err != nil {
			return err
		}
		b = b[n:]
	}
	if len(b) == 0 {
		return nil
	}
	n, err := sendNonBlocking(k.fd, b)
	k.uncork()
	if err != nil && err != syscall.EAGAIN {
		return err
	}
	if b = b[max(n, 0):]; len(b) == 0 {
		return nil
	}
	_, err = k.conn.Write(b)
	return err
}

// Direct implements Conn.
func (k *keptSSE) Direct() bool { return true }

// TryWrite implements Conn.
func (k *keptSSE) TryWrite(b []byte) (int, error) {
	if len(k.held) > 0 {
		return k.sendHeld(b)
	}
	n, err := sendNonBlocking(k.fd, b)
	k.uncork()
	return n, err
}

// Sender implements Conn.
func (k *keptSSE) Sender() Sender {
	return Sender{fd: k.fd, kept: true, corked: k.corked.Load(), held: len(k.held) > 0, k: k}
}

// Abort implements Conn: blocked and later writes, net/http's last chunk
// included, fail at once, and net/http then closes the connection.
func (k *keptSSE) Abort() { _ = k.conn.SetWriteDeadline(time.Unix(1, 0)) }

// Close implements Conn: the connection stays net/http's (uncorked, the
// head sent or left to the server).
func (k *keptSSE) Close() {
	k.uncork()
	if k.inBuf {
		k.letGo()
	} else if len(k.held) > 0 {
		if k.flushHeld() != nil {
			k.Abort() // the response cannot end well: the server closes
		}
	}
}

// Gone implements Conn.
func (k *keptSSE) Gone() <-chan struct{} { return k.gone }
