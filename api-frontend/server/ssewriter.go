package server

import (
	"context"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/gin-gonic/gin"
)

// chunkHeadroom is the space kept free at the start of every mailbox
// buffer, where the writer puts the HTTP/1.1 chunk-size line, so that a
// chunk goes to the socket with one write and no copy.
const chunkHeadroom = 10

// bufPool recycles mailbox buffers (each starts with chunkHeadroom bytes).
var bufPool = sync.Pool{New: func() any { b := make([]byte, chunkHeadroom, 4096); return &b }}

func getBuf() *[]byte {
	b := bufPool.Get().(*[]byte)
	*b = (*b)[:chunkHeadroom]
	return b
}

func putBuf(b *[]byte) {
	if cap(*b) > 1<<20 {
		return // do not keep huge buffers
	}
	bufPool.Put(b)
}

// sseWriter sends a stream's bytes to the client.
type sseWriter interface {
	// write sends buf[chunkHeadroom:]; the headroom may be overwritten and
	// buf may grow by a few bytes of framing. last ends the response.
	write(buf *[]byte, last bool) error
	// writeRaw sends already framed bytes.
	writeRaw(b []byte) error
	// close releases the connection (hijacked writers close it).
	close()
}

// frameChunk turns buf (payload after chunkHeadroom) into one HTTP/1.1
// chunk in place, adding the terminating chunk when last, and returns the
// bytes to send ("" when there is nothing).
func frameChunk(buf *[]byte, last bool) []byte {
	b := *buf
	n := len(b) - chunkHeadroom
	start := chunkHeadroom
	if n > 0 {
		var hex [16]byte
		hx := strconv.AppendInt(hex[:0], int64(n), 16)
		hx = append(hx, '\r', '\n')
		start = chunkHeadroom - len(hx)
		copy(b[start:], hx)
		b = append(b, '\r', '\n')
	}
	if last {
		b = append(b, "0\r\n\r\n"...)
	}
	*buf = b
	return b[start:]
}

// startSSE sends the response head and returns the stream's writer. It
// takes the connection over (http.Hijacker) when it can: SSE frames then go
// to the socket with one write each, skipping net/http's buffering, chunk
// formatting and copies (the largest frontend cost per token after the
// write syscall itself). gone is called once if the client disconnects.
// Otherwise it falls back to the ResponseWriter.
func startSSE(c *gin.Context, sndBuf int, gone func()) (sseWriter, error) {
	if c.Request.ProtoMajor == 1 && c.Request.ProtoMinor == 1 && canHijack(c.Writer) {
		conn, brw, err := http.NewResponseController(c.Writer).Hijack()
		if err == nil {
			if brw != nil && brw.Writer.Buffered() > 0 {
				_ = brw.Writer.Flush()
			}
			if tc, ok := conn.(*net.TCPConn); ok && sndBuf > 0 {
				_ = tc.SetWriteBuffer(sndBuf)
			}
			h := &hijackedSSE{conn: conn, fd: -1}
			if sc, ok := conn.(syscall.Conn); ok {
				if rc, err := sc.SyscallConn(); err == nil {
					h.rc = rc
					_ = rc.Control(func(fd uintptr) { h.fd = int(fd) })
				}
			}
			head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n" +
				"Date: " + time.Now().UTC().Format(http.TimeFormat) + "\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
			if _, err := conn.Write([]byte(head)); err != nil {
				_ = conn.Close()
				return nil, err
			}
			go h.watch(gone)
			return h, nil
		}
	}
	w := c.Writer
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	w.Flush()
	stop := contextAfter(c, gone)
	return &plainSSE{w: w, stop: stop}, nil
}

// canHijack reports whether the writer under gin's can be hijacked (gin's
// own Hijack panics when it cannot).
func canHijack(w gin.ResponseWriter) bool {
	var rw http.ResponseWriter = w
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
	fd int
}

func (h *hijackedSSE) write(buf *[]byte, last bool) error {
	return h.writeRaw(frameChunk(buf, last))
}

func (h *hijackedSSE) writeRaw(b []byte) error {
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

// tryWrite writes b without waiting: it returns how much the socket took
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
func (h *hijackedSSE) tryWrite(b []byte) (int, error) {
	if h.fd < 0 {
		return h.tryWriteRC(b)
	}
	return sendNonBlocking(h.fd, b)
}

// sendNonBlocking is tryWrite on the socket fd.
func sendNonBlocking(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
			syscall.MSG_DONTWAIT|syscall.MSG_NOSIGNAL, 0, 0)
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

func (h *hijackedSSE) close() { _ = h.conn.Close() }

// watch reads until the client closes the connection (or close is called)
// and then reports the client gone; a streaming client sends nothing more.
func (h *hijackedSSE) watch(gone func()) {
	var b [512]byte
	for {
		if _, err := h.conn.Read(b[:]); err != nil {
			gone()
			return
		}
	}
}

// plainSSE writes through the ResponseWriter (HTTP/2, or no hijacking).
type plainSSE struct {
	w    gin.ResponseWriter
	stop func() bool
}

func (p *plainSSE) write(buf *[]byte, last bool) error {
	b := (*buf)[chunkHeadroom:]
	if len(b) == 0 {
		return nil
	}
	if _, err := p.w.Write(b); err != nil {
		return err
	}
	p.w.Flush()
	return nil
}

func (p *plainSSE) writeRaw(b []byte) error {
	if _, err := p.w.Write(b); err != nil {
		return err
	}
	p.w.Flush()
	return nil
}

func (p *plainSSE) close() { p.stop() }

// contextAfter calls f when the request's context ends (client gone); the
// returned stop cancels that.
func contextAfter(c *gin.Context, f func()) func() bool {
	return context.AfterFunc(c.Request.Context(), f)
}
