// Package httpserve is a lean HTTP/1.1 connection server for api-frontend:
// it parses requests itself and calls an http.Handler (gin's Engine) with
// its own *http.Request and http.ResponseWriter, in place of net/http's
// per-request path, which was the largest part of the frontend's CPU per
// request (docs/bench/frontend.md).
//
// What it saves against net/http, per request: the background read that
// net/http starts while each handler runs to learn that the client went
// away (a goroutine, a read that finds nothing, two parks and wake-ups and
// two deadline changes); here every connection's socket is registered once
// in the server's epoll set for the peer's close (EPOLLRDHUP,
// edge-triggered: arriving requests make no event), and one goroutine per
// server cancels the request in flight of a connection whose peer closed.
// Also: one bufio reader and writer and one response value per connection,
// reused by every request on it; the header map reused; the Date header
// formatted once a second.
//
// What it does as net/http does (the frontend's behaviour must not change
// with the server): HTTP/1.1 and 1.0 keep-alive (Connection headers),
// Content-Length and chunked request bodies, Expect: 100-continue, a limit
// on the request head (431), the idle and read-header timeouts, 400/501
// answers to requests it cannot parse, a response's Content-Length when
// the handler wrote less than 2 KiB and did not flush (else chunked),
// Content-Type sniffing, HEAD and bodiless statuses, discarding up to
// 256 KiB of an unread body before reusing the connection, recovery from a
// handler's panic (http.ErrAbortHandler cuts the connection quietly), and
// Shutdown (no new connections, idle ones closed, responses in flight end
// with Connection: close). Not supported: HTTP/2, TLS, Hijack, trailers.
// Linux only (epoll).
package httpserve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Server serves HTTP/1.x on a listener. Set its fields before Serve.
type Server struct {
	// Handler answers every request.
	Handler http.Handler
	// ReadHeaderTimeout bounds the time from a request's first byte to
	// the end of its head (0: none).
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept
	// connection (0: ReadHeaderTimeout; both 0: none).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request head (0: http.DefaultMaxHeaderBytes).
	MaxHeaderBytes int
	// ConnContext, when set, derives each connection's context (every
	// request context on it derives from that one), as http.Server's.
	ConnContext func(ctx context.Context, c net.Conn) context.Context
	// ErrorLog receives handler panics (nil: the log package's logger).
	ErrorLog *log.Logger

	mu       sync.Mutex
	ln       net.Listener
	conns    map[*conn]struct{}
	watch    *watcher
	closed   bool
	shutting atomic.Bool
	done     chan struct{} // closed when the last connection ends during Shutdown
	date     atomic.Pointer[cachedDate]
}

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = http.ErrServerClosed

// Serve accepts connections on ln and serves each in its own goroutine
// until Shutdown or Close; it closes ln when it returns.
func (s *Server) Serve(ln net.Listener) error {
	w, err := newWatcher()
	if err != nil {
		return fmt.Errorf("httpserve: %w", err)
	}
	s.mu.Lock()
	if s.closed || s.shutting.Load() {
		s.mu.Unlock()
		w.close()
		_ = ln.Close()
		return ErrServerClosed
	}
	s.ln, s.watch = ln, w
	if s.conns == nil {
		s.conns = map[*conn]struct{}{}
	}
	s.mu.Unlock()
	defer ln.Close()
	base := context.Background()
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.shutting.Load() || s.isClosed() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// as net/http: back off on temporary accept errors
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("httpserve: accept: %w", err)
		}
		delay = 0
		sc := s.newConn(c)
		if sc == nil {
			_ = c.Close()
			continue
		}
		go sc.serve(base)
	}
}

// isClosed reports whether Close (or the end of Shutdown) was called.
func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// newConn registers c (nil when the server is closing).
func (s *Server) newConn(c net.Conn) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.shutting.Load() {
		return nil
	}
	sc := &conn{srv: s, rwc: c}
	sc.state.Store(stateIdle)
	s.conns[sc] = struct{}{}
	return sc
}

// dropConn unregisters c once it is closed.
func (s *Server) dropConn(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if len(s.conns) == 0 && s.done != nil {
		close(s.done)
		s.done = nil
	}
}

// Shutdown stops accepting, closes the idle connections and waits until
// every response in flight has ended (those end with Connection: close)
// or ctx ends, as http.Server.Shutdown.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutting.Store(true)
	s.mu.Lock()
	if s.ln != nil {
		_ = s.ln.Close()
	}
	var done chan struct{}
	if len(s.conns) > 0 {
		done = make(chan struct{})
		s.done = done
	}
	s.mu.Unlock()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		s.closeIdle()
		if done == nil {
			break
		}
		select {
		case <-done:
			done = nil
			continue
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	s.mu.Lock()
	w := s.watch
	s.closed = true
	s.mu.Unlock()
	if w != nil {
		w.close()
	}
	return nil
}

// closeIdle closes every connection that waits for a request.
func (s *Server) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.state.CompareAndSwap(stateIdle, stateClosed) {
			_ = c.rwc.Close()
		}
	}
}

// Close closes the listener and every connection at once.
func (s *Server) Close() error {
	s.shutting.Store(true)
	s.mu.Lock()
	s.closed = true
	if s.ln != nil {
		_ = s.ln.Close()
	}
	for c := range s.conns {
		_ = c.rwc.Close()
	}
	w := s.watch
	s.mu.Unlock()
	if w != nil {
		w.close()
	}
	return nil
}

// logf logs to ErrorLog.
func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// A connection's states (conn.state).
const (
	stateIdle   int32 = iota // waiting for a request (Shutdown may close it)
	stateActive              // a request is being read or served
	stateClosed              // closed by Shutdown
)

// conn is one connection and the state its requests reuse.
type conn struct {
	srv   *Server
	rwc   net.Conn
	state atomic.Int32
	peer  *peer          // its entry in the server's epoll set (nil: not watched)
	rd    deadlineReader // what br reads: the socket, its read deadline set lazily
	br    *bufio.Reader
	bw    *bufio.Writer
	w     response
	line  []byte // a head line longer than br's buffer
	fold  []byte // a header field folded over several lines

	// What readHead reuses from one request to the next.
	req        http.Request // the request being read (handlers get a copy)
	lastTarget string       // the previous request's target
	remote     string       // rwc.RemoteAddr().String(), once
	fields     []headField  // the head's fields
	prev       []headField  // the previous head's fields (their values)
	vals       []byte       // the head's values that are not in prev
	head       byteSink     // the response head BufferHead returned
}

// bodyDiscardLimit is how much of an unread request body is read and
// dropped to keep the connection (net/http's figure).
const bodyDiscardLimit = 256 << 10

func (c *conn) serve(base context.Context) {
	defer func() {
		if v := recover(); v != nil && v != http.ErrAbortHandler {
			c.srv.logf("httpserve: panic serving %v: %v", c.rwc.RemoteAddr(), v)
		}
		if c.peer != nil {
			c.srv.watch.remove(c.peer) // before the close: see watcher.peerClosed
		}
		_ = c.rwc.Close()
		c.srv.dropConn(c)
	}()
	ctx := context.WithValue(base, http.LocalAddrContextKey, c.rwc.LocalAddr())
	if c.srv.ConnContext != nil {
		ctx = c.srv.ConnContext(ctx, c.rwc)
	}
	if w := c.srv.watch; w != nil {
		c.peer = w.add(c.rwc)
	}
	c.rd.conn = c.rwc
	c.br = bufio.NewReaderSize(&c.rd, 4096)
	c.bw = bufio.NewWriterSize(c.rwc, 4096)
	c.w.c = c
	for {
		req, cancel, err := c.readRequest(ctx)
		if err != nil {
			c.answerBadRequest(err)
			return
		}
		keep := c.serveOneCancel(req, cancel)
		if !keep {
			return
		}
		c.state.Store(stateIdle)
	}
}

// serveOne runs the handler for req and ends its response; false when
// the connection must close.
func (c *conn) serveOne(req *http.Request) (keep bool) {
	w := &c.w
	w.reset(req)
	defer func() {
		if c.peer != nil {
			c.peer.set(nil)
		}
	}()
	c.srv.Handler.ServeHTTP(w, req)
	if w.aborted {
		return false
	}
	if err := w.finish(); err != nil {
		return false
	}
	return !w.closeAfter && !w.closeQuiet
}

// serveOneCancel is serveOne, then cancel (also when the handler panics).
func (c *conn) serveOneCancel(req *http.Request, cancel context.CancelFunc) bool {
	defer cancel()
	return c.serveOne(req)
}

// answerBadRequest answers a request that could not be read as net/http
// does (the same bytes: "400 Bad Request" and the like, then close);
// nothing for a connection that simply ended or timed out.
func (c *conn) answerBadRequest(err error) {
	var he *headError
	if !errors.As(err, &he) {
		return
	}
	_ = c.rwc.SetWriteDeadline(time.Now().Add(time.Second))
	msg := "HTTP/1.1 " + he.line + "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n" + he.body
	if he == errExpect {
		msg = "HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nDate: " + string(c.srv.httpDate()) + "\r\nContent-Length: 0\r\n\r\n"
	}
	_, _ = io.WriteString(c.rwc, msg)
	if he == errTooLarge {
		// as net/http: let the client read the answer before the close
		// resets a connection with unread request bytes
		if cw, ok := c.rwc.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// headError is a request net/http answers before closing: line follows
// "HTTP/1.1 " and body is the answer's text.
type headError struct{ line, body string }

func (e *headError) Error() string { return e.line }

// statusError is net/http's answer for its statusError kind: the text in
// the status line and the body.
func statusError(code int, text string) *headError {
	s := strconv.Itoa(code) + " " + http.StatusText(code) + ": " + text
	return &headError{line: s, body: s}
}

var (
	errBadRequest    = &headError{line: "400 Bad Request", body: "400 Bad Request"}
	errTooLarge      = &headError{line: "431 Request Header Fields Too Large", body: "431 Request Header Fields Too Large"}
	errMissingHost   = statusError(http.StatusBadRequest, "missing required Host header")
	errMalformedHost = statusError(http.StatusBadRequest, "malformed Host header")
	errBadHeaderName = statusError(http.StatusBadRequest, "invalid header name")
	errUnsupported   = statusError(http.StatusHTTPVersionNotSupported, "unsupported protocol version")
	errBadTE         = &headError{line: "501 Not Implemented", body: "Unsupported transfer encoding"}
	errExpect        = &headError{line: "417 Expectation Failed"}
)

// deadlineReader reads the connection, setting the read deadline asked
// for (SetReadDeadline) only before a read that reaches the socket. A
// request sets and clears deadlines around its head and its body (idle
// wait, head, body: four per request), and the usual request is in the
// reader's buffer after its first read, so most of them would arm and
// disarm the runtime's timer for nothing. The connection's reads are its
// serving goroutine's, so the deadline asked for is too (no lock); a
// deadline cannot interrupt a read in progress (none is needed: nothing
// reads concurrently). Between the reads, the socket keeps the last
// deadline applied, which, when it passes, only marks the socket; the
// next read applies the deadline asked for first.
type deadlineReader struct {
	conn net.Conn
	want time.Time // the deadline asked for
	set  time.Time // the deadline the socket has
}

// SetReadDeadline asks for deadline t for the reads from now on.
func (d *deadlineReader) SetReadDeadline(t time.Time) { d.want = t }

// Read implements io.Reader.
func (d *deadlineReader) Read(p []byte) (int, error) {
	if !d.want.Equal(d.set) {
		if err := d.conn.SetReadDeadline(d.want); err != nil {
			return 0, err
		}
		d.set = d.want
	}
	return d.conn.Read(p)
}
