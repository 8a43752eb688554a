package sse

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/api-frontend/rawsock"
)

// tcpPair returns both ends of a loopback TCP connection and the
// client end's descriptor.
func tcpPair(t *testing.T) (client *net.TCPConn, server net.Conn, fd int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-acc
	if server == nil {
		t.Fatal("accept failed")
	}
	client = c.(*net.TCPConn)
	t.Cleanup(func() { client.Close(); server.Close() })
	rc, err := client.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Control(func(f uintptr) { fd = int(f) }); err != nil {
		t.Fatal(err)
	}
	return client, server, fd
}

// TestSendNonBlocking covers the direct write's three outcomes: all taken,
// EAGAIN once the socket is full (never blocking), and an error without
// SIGPIPE once the peer is gone.
func TestSendNonBlocking(t *testing.T) {
	client, server, fd := tcpPair(t)
	_ = client.SetWriteBuffer(4096)
	msg := []byte("data: hello\n\n")
	if n, err := sendNonBlocking(fd, msg); err != nil || n != len(msg) {
		t.Fatalf("send: %d, %v", n, err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(server, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("read %q, %v", got, err)
	}
	if n, err := sendNonBlocking(fd, nil); n != 0 || err != nil {
		t.Fatalf("empty send: %d, %v", n, err)
	}

	// nobody reads: the socket fills and the send reports EAGAIN
	big := bytes.Repeat([]byte("x"), 64<<10)
	start := time.Now()
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		_, err = sendNonBlocking(fd, big)
	}
	if !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("full socket: %v, want EAGAIN", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("filling the socket took %s: a send blocked", d)
	}

	// the peer closes: EPIPE or ECONNRESET, and the test process is not
	// killed by SIGPIPE
	server.Close()
	deadline := time.Now().Add(5 * time.Second)
	for err == nil || errors.Is(err, syscall.EAGAIN) {
		if time.Now().After(deadline) {
			t.Fatal("no error after the peer closed")
		}
		_, err = sendNonBlocking(fd, msg)
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("closed peer: %v", err)
	}
}

// TestHijackedWriteRawPartial writes more than the socket takes at once
// through writeRaw: the part the non-blocking send leaves goes through the
// connection's blocking write, and the reader gets every byte in order.
func TestHijackedWriteRawPartial(t *testing.T) {
	client, server, fd := tcpPair(t)
	_ = client.SetWriteBuffer(4096)
	h := &hijackedSSE{conn: client, fd: fd}
	payload := make([]byte, 1<<20)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	got := make(chan []byte, 1)
	go func() {
		time.Sleep(50 * time.Millisecond) // let the first send fill the socket
		b, _ := io.ReadAll(io.LimitReader(server, int64(len(payload))))
		got <- b
	}()
	if err := h.WriteRaw(payload); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, payload) {
		t.Fatalf("reader got %d bytes, want %d in order", len(b), len(payload))
	}
}

// keptServer serves handler over loopback with ConnContext on a plain
// listener (the head is corked), and counts the connections it accepted.
func keptServer(t testing.TB, handler http.HandlerFunc) (url string, accepted *atomic.Int64) {
	t.Helper()
	return keptServerOn(t, nil, handler)
}

// rawServer is keptServer on a rawsock listener, as the frontend serves.
func rawServer(t testing.TB, handler http.HandlerFunc) (url string, accepted *atomic.Int64) {
	t.Helper()
	return keptServerOn(t, rawsock.Listener, handler)
}

// keptModes are the listeners the kept path is tested on: a plain one and
// rawsock's (as the frontend serves).
var keptModes = []struct {
	name string
	wrap func(net.Listener) net.Listener
}{{"plain", nil}, {"rawsock", rawsock.Listener}}

// keptServerOn serves handler over loopback with ConnContext on a
// listener wrapped by wrap (when not nil).
func keptServerOn(t testing.TB, wrap func(net.Listener) net.Listener, handler http.HandlerFunc) (url string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	accepted = new(atomic.Int64)
	hs := &http.Server{Handler: handler, ConnContext: func(ctx context.Context, c net.Conn) context.Context {
		accepted.Add(1)
		return ConnContext(ctx, c)
	}}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String(), accepted
}

// TestKeptConnection streams through the kept path (ConnContext): every
// chunk goes out by direct send (blocking Write, non-blocking Sender, last
// chunk without a terminator), net/http ends the response, and the client's
// next request reuses the connection, and with it the connection's one
// keptSSE, whose head is corked again for each request.
func TestKeptConnection(t *testing.T) {
	for _, m := range keptModes {
		t.Run(m.name, func(t *testing.T) { testKeptConnection(t, m.wrap) })
	}
}

func testKeptConnection(t *testing.T, wrap func(net.Listener) net.Listener) {
	events := []string{"data: one\n\n", "data: two\n\n", "data: [DONE]\n\n"}
	var mu sync.Mutex
	var conns []Conn
	url, accepted := keptServerOn(t, wrap, func(w http.ResponseWriter, r *http.Request) {
		c, err := Start(w, r, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		mu.Lock()
		conns = append(conns, c) // requests on one connection run in turn
		i := len(conns) - 1
		mu.Unlock()
		if k, ok := c.(*keptSSE); !ok || !c.Direct() {
			t.Errorf("Start gave %T (direct %v), want the kept path", c, c.Direct())
		} else if !k.corked.Load() {
			t.Errorf("request %d: head not corked", i)
		}
		b := GetBuf()
		defer PutBuf(b)
		*b = append((*b)[:Headroom], events[0]...)
		if err := c.Write(b, false); err != nil {
			t.Error(err)
		}
		*b = append((*b)[:Headroom], events[1]...)
		s := c.Sender()
		if n, err := s.TrySend(s.Frame(b, false)); err != nil || n == 0 {
			t.Errorf("TrySend: %d, %v", n, err)
		}
		*b = append((*b)[:Headroom], events[2]...)
		if err := c.Write(b, true); err != nil {
			t.Error(err)
		}
	})
	client := &http.Client{Transport: &http.Transport{}}
	for i := 0; i < 3; i++ {
		var reused bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }})
		req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader("{}"))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(body), strings.Join(events, ""); got != want {
			t.Fatalf("request %d: body %q, want %q", i, got, want)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || resp.Close {
			t.Fatalf("request %d: Content-Type %q, Close %v", i, ct, resp.Close)
		}
		if d, err := http.ParseTime(resp.Header.Get("Date")); err != nil || time.Since(d).Abs() > 5*time.Second ||
			len(resp.Header.Values("Date")) != 1 {
			t.Fatalf("request %d: Date %q (%v)", i, resp.Header.Values("Date"), err)
		}
		if i > 0 && !reused {
			t.Fatalf("request %d: connection not reused", i)
		}
	}
	if n := accepted.Load(); n != 1 {
		t.Fatalf("%d connections accepted, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, c := range conns {
		if c != conns[0] {
			t.Fatalf("request %d got Conn %p, request 0 %p: want the connection's one", i, c, conns[0])
		}
	}
}

// TestKeptClientGone: a client that goes away mid-stream on the kept path
// is reported through Gone.
func TestKeptClientGone(t *testing.T) {
	for _, m := range keptModes {
		t.Run(m.name, func(t *testing.T) { testKeptClientGone(t, m.wrap) })
	}
}

func testKeptClientGone(t *testing.T, wrap func(net.Listener) net.Listener) {
	gone := make(chan struct{})
	sent := make(chan struct{})
	url, _ := keptServerOn(t, wrap, func(w http.ResponseWriter, r *http.Request) {
		c, err := Start(w, r, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		b := GetBuf()
		*b = append((*b)[:Headroom], "data: one\n\n"...)
		if err := c.Write(b, false); err != nil {
			t.Error(err)
		}
		close(sent)
		select {
		case <-c.Gone():
			close(gone)
		case <-time.After(10 * time.Second):
			t.Error("client gone not reported")
		}
	})
	resp, err := http.Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	<-sent
	resp.Body.Close() // closes the connection: the body was not read to its end
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("gone not called")
	}
}

// TestStartWithoutConnContext: without ConnContext an HTTP/1.1 stream
// takes the connection over, as before.
func TestStartWithoutConnContext(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Start(w, r, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		if _, ok := c.(*hijackedSSE); !ok {
			t.Errorf("Start gave %T, want the hijacked path", c)
		}
		b := GetBuf()
		*b = append((*b)[:Headroom], "data: [DONE]\n\n"...)
		if err := c.Write(b, true); err != nil {
			t.Error(err)
		}
	}))
	defer hs.Close()
	resp, err := http.Post(hs.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "data: [DONE]\n\n" || !resp.Close {
		t.Fatalf("body %q, Close %v", body, resp.Close)
	}
}

// TestHijackedClientGone: on the taken-over path (no ConnContext) Gone is
// closed by the connection's watcher when the client closes.
func TestHijackedClientGone(t *testing.T) {
	gone := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Start(w, r, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		b := GetBuf()
		*b = append((*b)[:Headroom], "data: one\n\n"...)
		if err := c.Write(b, false); err != nil {
			t.Error(err)
		}
		select {
		case <-c.Gone():
			close(gone)
		case <-time.After(10 * time.Second):
			t.Error("client gone not reported")
		}
	}))
	defer hs.Close()
	resp, err := http.Post(hs.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first line %q (%v)", line, err)
	}
	resp.Body.Close()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("Gone not closed")
	}
}

// TestKeptEndLeavesWithTerminator: on a kept connection the stream's last
// bytes stay in net/http's buffer until the handler returns, so that they
// leave with the terminating chunk in one send: nothing of them reaches
// the client while the handler still runs, and then both arrive. Earlier
// chunks go out at once.
func TestKeptEndLeavesWithTerminator(t *testing.T) {
	for _, m := range keptModes {
		t.Run(m.name, func(t *testing.T) { testKeptEndLeavesWithTerminator(t, m.wrap) })
	}
}

func testKeptEndLeavesWithTerminator(t *testing.T, wrap func(net.Listener) net.Listener) {
	wrote := make(chan struct{})
	checked := make(chan struct{})
	url, _ := keptServerOn(t, wrap, func(w http.ResponseWriter, r *http.Request) {
		c, err := Start(w, r, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		if c.Sender().DirectEnd() {
			t.Error("Sender.DirectEnd on a kept connection")
		}
		b := GetBuf()
		defer PutBuf(b)
		*b = append((*b)[:Headroom], "data: one\n\n"...)
		if err := c.Write(b, false); err != nil {
			t.Error(err)
		}
		*b = append((*b)[:Headroom], "data: [DONE]\n\n"...)
		if err := c.Write(b, true); err != nil {
			t.Error(err)
		}
		close(wrote)
		<-checked // the client has seen what arrived before the handler returns
	})
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
		t.Fatal(err)
	}
	<-wrote
	var got []byte
	buf := make([]byte, 4096)
	read := func(until string) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		for !strings.Contains(string(got), until) {
			n, err := conn.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				return
			}
		}
	}
	read("\r\n0\r\n\r\n") // times out: the handler has not returned
	if !strings.Contains(string(got), "data: one\n\n") || strings.Contains(string(got), "[DONE]") {
		close(checked)
		t.Fatalf("before the handler returned the client got %q: want the first chunk and not the last", got)
	}
	close(checked)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	read("\r\n0\r\n\r\n")
	if !strings.HasSuffix(string(got), "\r\ne\r\ndata: [DONE]\n\n\r\n0\r\n\r\n") {
		t.Fatalf("response %q: want the last chunk and the terminating chunk at its end", got)
	}
}

// TestKeptHeadLeavesWithFirstChunk: on a kept connection the response head
// waits in the corked socket until the first chunk is sent, and then both
// arrive; the stream's later sends go out at once.
func TestKeptHeadLeavesWithFirstChunk(t *testing.T) {
	started := make(chan time.Time)
	send := make(chan struct{})
	url, _ := keptServer(t, func(w http.ResponseWriter, r *http.Request) {
		c, err := Start(w, r, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		s := c.Sender()
		started <- time.Now()
		<-send
		b := GetBuf()
		defer PutBuf(b)
		for _, ev := range []string{"data: one\n\n", "data: two\n\n"} {
			*b = append((*b)[:Headroom], ev...)
			if n, err := s.TrySend(s.Frame(b, false)); err != nil || n == 0 {
				t.Errorf("TrySend: %d, %v", n, err)
			}
		}
		*b = append((*b)[:Headroom], "data: [DONE]\n\n"...)
		if err := c.Write(b, true); err != nil {
			t.Error(err)
		}
	})
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
		t.Fatal(err)
	}
	t0 := <-started
	buf := make([]byte, 4096)
	_ = conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _ := conn.Read(buf); n > 0 && time.Since(t0) < 150*time.Millisecond {
		// (The kernel sends a corked head alone after 200 ms; a reader
		// descheduled that long proves nothing.)
		t.Fatalf("the head left before the first chunk: %q", buf[:n])
	}
	close(send)
	var got []byte
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for !strings.HasSuffix(string(got), "\r\n0\r\n\r\n") {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("read: %v after %q", err, got)
		}
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 200 OK\r\n") ||
		!strings.Contains(string(got), "\r\n\r\nb\r\ndata: one\n\n\r\nb\r\ndata: two\n\n\r\ne\r\ndata: [DONE]\n\n\r\n0\r\n\r\n") {
		t.Fatalf("response %q", got)
	}
}

// TestKeptHeadNotHeld: a corked head is not held for a slow first token:
// the kernel sends it by itself (TCP_CORK's 200 ms ceiling), so a client
// waiting for the head gets it without any chunk.
func TestKeptHeadNotHeld(t *testing.T) {
	release := make(chan struct{})
	url, _ := keptServer(t, func(w http.ResponseWriter, r *http.Request) {
		c, err := Start(w, r, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		<-release
	})
	defer close(release)
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	var got []byte
	buf := make([]byte, 4096)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for !strings.Contains(string(got), "\r\n\r\n") {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("head not received without a chunk: %v after %q", err, got)
		}
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 200 OK\r\n") {
		t.Fatalf("head %q", got)
	}
	t.Logf("head arrived by itself after %v", time.Since(t0).Round(time.Millisecond))
}
