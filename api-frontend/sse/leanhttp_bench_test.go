package sse

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/api-frontend/httpserve"
	"github.com/sluice-llm/sluice/api-frontend/rawsock"
)

// BenchmarkKeptRequestLean is BenchmarkKeptRequest (same client process,
// same handler, rawsock listener, ConnContext) served by leanServer, a
// prototype of the hot path of an HTTP/1.1 connection server that would
// replace net/http's: it answers how much of net/http's per-request CPU a
// lean server could save before anyone writes one for real (issue 23 item
// 6). Sub-benchmarks:
//   - bgread: client-gone detection as net/http does it (a goroutine per
//     request reads one byte while the handler runs; the handler's end
//     aborts that read with a past deadline and waits for it);
//   - epoll: client-gone detection once per connection: at accept the
//     socket joins the listener's epoll set for EPOLLRDHUP (edge-triggered;
//     no event for arriving requests), one goroutine waits on that set in
//     the runtime's poller, and a peer's close cancels the connection's
//     request in flight; a request only stores its cancel function;
//   - nodetect: no client-gone detection at all: the lower bound of any
//     such server, not a valid server;
//   - httpserve: the server that came of it (api-frontend/httpserve, as
//     api-frontend --http-server lean runs it: timeouts, ConnContext).
func BenchmarkKeptRequestLean(b *testing.B) {
	for _, mode := range []string{"bgread", "epoll", "nodetect", "httpserve"} {
		b.Run(mode, func(b *testing.B) {
			var url string
			if mode == "httpserve" {
				url = httpserveServe(b, keptRequestHandler(b))
			} else {
				url = leanServe(b, keptRequestHandler(b), mode)
			}
			keptRequestRun(b, url)
		})
	}
}

// httpserveServe serves h with httpserve on a loopback rawsock listener.
func httpserveServe(b *testing.B, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := &httpserve.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second, ConnContext: ConnContext}
	go func() { _ = s.Serve(rawsock.Listener(ln)) }()
	b.Cleanup(func() { _ = s.Close() })
	return "http://" + ln.Addr().String()
}

// leanServe serves h on a loopback rawsock listener with leanServer.
func leanServe(b *testing.B, h http.Handler, mode string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := &leanServer{h: h, detect: mode == "bgread"}
	if mode == "epoll" {
		if s.watch, err = newLeanWatcher(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(s.watch.close)
	}
	rl := rawsock.Listener(ln)
	go func() {
		for {
			c, err := rl.Accept()
			if err != nil {
				return
			}
			go s.serveConn(c)
		}
	}()
	b.Cleanup(func() { _ = ln.Close() })
	return "http://" + ln.Addr().String()
}

// leanServer is the prototype: per connection one goroutine, one bufio
// reader and writer and one response value, reused by every request; the
// request line and headers parsed by hand into a reused header map; bodies
// with Content-Length only; responses chunked (the streamed case). Not a
// complete server (no chunked request bodies, Expect, limits or timeouts):
// it measures the hot path only.
type leanServer struct {
	h      http.Handler
	detect bool         // net/http's background read per request
	watch  *leanWatcher // or the epoll set, when not nil
}

func (s *leanServer) serveConn(c net.Conn) {
	defer c.Close()
	base := ConnContext(context.Background(), c)
	br := bufio.NewReaderSize(c, 4096)
	bw := bufio.NewWriterSize(c, 4096)
	w := &leanResponse{bw: bw, hdr: make(http.Header, 8)}
	body := &leanBody{br: br}
	hdr := make(http.Header, 8)
	bg := &leanBG{c: c}
	var pc *leanPeer
	if s.watch != nil {
		var err error
		if pc, err = s.watch.add(c); err != nil {
			return
		}
		defer s.watch.remove(pc)
	}
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		method, target, ok := parseRequestLine(line)
		if !ok {
			return
		}
		clear(hdr)
		var cl int64
		host := ""
		for {
			l, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			l = bytes.TrimRight(l, "\r\n")
			if len(l) == 0 {
				break
			}
			i := bytes.IndexByte(l, ':')
			if i <= 0 {
				return
			}
			key := http.CanonicalHeaderKey(string(l[:i]))
			val := string(bytes.TrimSpace(l[i+1:]))
			hdr[key] = append(hdr[key], val)
			switch key {
			case "Content-Length":
				if cl, err = strconv.ParseInt(val, 10, 64); err != nil || cl < 0 {
					return
				}
			case "Host":
				host = val
			}
		}
		ctx, cancel := context.WithCancel(base)
		body.n = cl
		r := &http.Request{
			Method: method, URL: &url.URL{Path: target}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: hdr, Body: body, ContentLength: cl, Host: host, RequestURI: target, RemoteAddr: c.RemoteAddr().String(),
		}
		r = r.WithContext(ctx)
		w.reset()
		if s.detect {
			bg.start(cancel, br, body)
		}
		if pc != nil {
			pc.set(cancel)
		}
		s.h.ServeHTTP(w, r)
		if s.detect && !bg.finish() {
			cancel()
			return
		}
		if pc != nil {
			pc.set(nil)
		}
		cancel()
		if err := w.finish(); err != nil {
			return
		}
	}
}

// parseRequestLine splits "METHOD target HTTP/1.1\r\n".
func parseRequestLine(l []byte) (method, target string, ok bool) {
	l = bytes.TrimRight(l, "\r\n")
	i := bytes.IndexByte(l, ' ')
	j := bytes.LastIndexByte(l, ' ')
	if i <= 0 || j <= i || string(l[j+1:]) != "HTTP/1.1" {
		return "", "", false
	}
	switch string(l[:i]) { // interned: no allocation for the usual ones
	case "POST":
		method = http.MethodPost
	case "GET":
		method = http.MethodGet
	default:
		method = string(l[:i])
	}
	return method, string(l[i+1 : j]), true
}

// leanBody is a Content-Length request body read from the connection's
// reader.
type leanBody struct {
	br *bufio.Reader
	n  int64 // bytes left
}

func (b *leanBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	k, err := b.br.Read(p)
	b.n -= int64(k)
	if err == nil && b.n == 0 {
		err = io.EOF
	}
	return k, err
}

func (b *leanBody) Close() error { return nil }

// leanBG is net/http's background read: once the body is in, one goroutine
// reads one byte while the handler runs; a read error cancels the
// request's context (the client went away).
type leanBG struct {
	c    net.Conn
	mu   sync.Mutex
	done chan struct{}
	err  error
	got  bool // a byte was read (a pipelined request): not kept by the prototype
	b    [1]byte
}

// start begins the read when nothing of the next request is buffered
// (net/http starts it when the handler has read the body; the prototype's
// client sends the body with the head, so it is in the buffer now).
func (g *leanBG) start(cancel context.CancelFunc, br *bufio.Reader, body *leanBody) {
	if int64(br.Buffered()) > body.n {
		g.done = nil
		return
	}
	g.done = make(chan struct{})
	go func() {
		n, err := g.c.Read(g.b[:])
		g.got, g.err = n > 0, err
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			cancel()
		}
		close(g.done)
	}()
}

// finish aborts the pending read and waits for it; false when the
// connection is gone (or the prototype got a pipelined byte it does not
// keep).
func (g *leanBG) finish() bool {
	if g.done == nil {
		return true
	}
	_ = g.c.SetReadDeadline(time.Unix(1, 0))
	<-g.done
	_ = g.c.SetReadDeadline(time.Time{})
	return !g.got && (g.err == nil || errors.Is(g.err, os.ErrDeadlineExceeded))
}

// leanResponse is the prototype's http.ResponseWriter and http.Flusher:
// chunked transfer encoding into the connection's writer.
type leanResponse struct {
	bw          *bufio.Writer
	hdr         http.Header
	wroteHeader bool
	status      int
	err         error
}

func (w *leanResponse) reset() {
	clear(w.hdr)
	w.wroteHeader, w.status, w.err = false, 0, nil
}

func (w *leanResponse) Header() http.Header { return w.hdr }

func (w *leanResponse) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	w.wroteHeader, w.status = true, code
	bw := w.bw
	_, _ = bw.WriteString("HTTP/1.1 ")
	var num [8]byte
	_, _ = bw.Write(strconv.AppendInt(num[:0], int64(code), 10))
	_ = bw.WriteByte(' ')
	_, _ = bw.WriteString(http.StatusText(code))
	_, _ = bw.WriteString("\r\n")
	for k, vs := range w.hdr {
		for _, v := range vs {
			_, _ = bw.WriteString(k)
			_, _ = bw.WriteString(": ")
			_, _ = bw.WriteString(v)
			_, _ = bw.WriteString("\r\n")
		}
	}
	var date [64]byte
	_, _ = bw.WriteString("Date: ")
	_, _ = bw.Write(time.Now().UTC().AppendFormat(date[:0], http.TimeFormat))
	_, _ = bw.WriteString("\r\nTransfer-Encoding: chunked\r\n\r\n")
}

func (w *leanResponse) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	var hex [16]byte
	_, _ = w.bw.Write(append(strconv.AppendInt(hex[:0], int64(len(p)), 16), '\r', '\n'))
	_, _ = w.bw.Write(p)
	_, err := w.bw.WriteString("\r\n")
	return len(p), err
}

// FlushError implements http.ResponseController's flush.
func (w *leanResponse) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.bw.Flush()
}

// Flush implements http.Flusher.
func (w *leanResponse) Flush() { _ = w.FlushError() }

// finish ends the response: the terminating chunk, one write with
// whatever the handler left buffered.
func (w *leanResponse) finish() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	_, _ = w.bw.WriteString("0\r\n\r\n")
	return w.bw.Flush()
}

// leanWatcher is the epoll mode's per-listener set of connections watched
// for their peer's close, and the goroutine that waits on it.
type leanWatcher struct {
	ep int
	f  *os.File
	rc syscall.RawConn

	mu    sync.Mutex
	conns map[int32]*leanPeer // by socket descriptor
}

// leanPeer is one watched connection: the cancel function of its request
// in flight, and whether its peer has gone.
type leanPeer struct {
	fd     int
	mu     sync.Mutex
	gone   bool
	cancel context.CancelFunc
}

// set stores the request in flight's cancel function (nil between
// requests), cancelling at once when the peer has already gone.
func (p *leanPeer) set(cancel context.CancelFunc) {
	p.mu.Lock()
	p.cancel = cancel
	gone := p.gone
	p.mu.Unlock()
	if gone && cancel != nil {
		cancel()
	}
}

func newLeanWatcher() (*leanWatcher, error) {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	if err := syscall.SetNonblock(ep, true); err != nil {
		_ = syscall.Close(ep)
		return nil, fmt.Errorf("epoll nonblock: %w", err)
	}
	f := os.NewFile(uintptr(ep), "lean-epoll")
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("epoll raw conn: %w", err)
	}
	w := &leanWatcher{ep: ep, f: f, rc: rc, conns: map[int32]*leanPeer{}}
	go w.run()
	return w, nil
}

// add registers c's socket for EPOLLRDHUP (edge-triggered; EPOLLHUP and
// EPOLLERR come with it): no event when a request arrives.
func (w *leanWatcher) add(c net.Conn) (*leanPeer, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, errors.New("lean: no socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("lean: syscall conn: %w", err)
	}
	p := &leanPeer{fd: -1}
	_ = rc.Control(func(fd uintptr) { p.fd = int(fd) })
	ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | -syscall.EPOLLET, Fd: int32(p.fd)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := syscall.EpollCtl(w.ep, syscall.EPOLL_CTL_ADD, p.fd, &ev); err != nil {
		return nil, fmt.Errorf("lean: epoll_ctl: %w", err)
	}
	w.conns[int32(p.fd)] = p
	return p, nil
}

// remove unregisters p before its socket is closed.
func (w *leanWatcher) remove(p *leanPeer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.conns, int32(p.fd))
	_ = syscall.EpollCtl(w.ep, syscall.EPOLL_CTL_DEL, p.fd, nil)
}

func (w *leanWatcher) close() { _ = w.f.Close() }

// run waits for peers' closes and cancels their requests in flight.
func (w *leanWatcher) run() {
	var evs [32]syscall.EpollEvent
	var n int
	wait := func(fd uintptr) bool {
		k, err := syscall.EpollWait(int(fd), evs[:], 0)
		n = max(k, 0)
		return n > 0 || (err != nil && err != syscall.EINTR)
	}
	for {
		if err := w.rc.Read(wait); err != nil {
			return
		}
		for i := range n {
			w.mu.Lock()
			p := w.conns[evs[i].Fd]
			w.mu.Unlock()
			if p == nil {
				continue
			}
			p.mu.Lock()
			p.gone = true
			cancel := p.cancel
			p.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		}
	}
}
