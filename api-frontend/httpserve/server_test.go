package httpserve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-llm/sluice/api-frontend/rawsock"
)

// testHandler answers by path, covering the ways a handler writes.
func testHandler(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/echo": // the body back, with a JSON type
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read: "+err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	case "/sniff": // no Content-Type: sniffed
		_, _ = io.WriteString(w, "<html><body>hi</body></html>")
	case "/big": // more than the buffer before chunking
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(bytes.Repeat([]byte("x"), 5000))
	case "/stream": // flushed: chunked
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i := range 3 {
			_, _ = io.WriteString(w, "data: "+strings.Repeat("a", i+1)+"\n\n")
			_ = http.NewResponseController(w).Flush()
		}
	case "/nocontent":
		w.WriteHeader(http.StatusNoContent)
	case "/error": // an API error
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"bad","type":"invalid_request_error"}}`)
	case "/close": // the handler asks to close
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "bye")
	case "/length": // a declared length
		w.Header().Set("Content-Length", "5")
		_, _ = io.WriteString(w, "hello")
	case "/unread": // the body is not read
		_, _ = io.WriteString(w, "ignored your body")
	case "/abort":
		panic(http.ErrAbortHandler)
	case "/query":
		_, _ = io.WriteString(w, r.URL.Query().Get("q")+" "+r.Host+" "+r.Method+" "+r.Proto)
	case "/headers": // what the handler sees
		_, _ = io.WriteString(w, r.Header.Get("X-Test")+"|"+r.Header.Get("Content-Type")+"|"+
			strings.Join(r.TransferEncoding, ",")+"|"+r.Header.Get("Expect"))
	default:
		http.NotFound(w, r)
	}
}

// servePair serves h with net/http and with Server, both on rawsock
// listeners, and returns their addresses.
func servePair(t *testing.T, h http.Handler, maxHeader int) (std, lean string) {
	t.Helper()
	ln1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second, MaxHeaderBytes: maxHeader,
		ErrorLog: nil}
	ls := &Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second, MaxHeaderBytes: maxHeader}
	go func() { _ = hs.Serve(rawsock.Listener(ln1)) }()
	go func() { _ = ls.Serve(rawsock.Listener(ln2)) }()
	t.Cleanup(func() { _ = hs.Close(); _ = ls.Close() })
	return ln1.Addr().String(), ln2.Addr().String()
}

// exchange sends raw on a new connection, half-closes after it when
// shut, and returns everything the server sent until it closed (or 0.5 s
// of silence).
func exchange(t *testing.T, addr, raw string, shut bool) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	if shut {
		_ = c.(*net.TCPConn).CloseWrite()
	}
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				out = append(out, "<open>"...)
			} else {
				out = append(out, "<closed>"...)
			}
			return string(out)
		}
	}
}

var dateRE = regexp.MustCompile(`Date: [^\r]*\r\n`)

// TestSameAsNetHTTP sends the same raw requests to net/http and to Server
// serving the same handler and requires the same bytes back (Date aside),
// and the same connection state after (closed or kept open). The answers
// are also kept as goldens in testdata/wire.
func TestSameAsNetHTTP(t *testing.T) {
	const h11 = " HTTP/1.1\r\nHost: x\r\n"
	tests := []struct {
		name, raw string
		shut      bool // half-close after the request (a client that goes)
	}{
		{"get", "GET /sniff" + h11 + "\r\n", false},
		{"get-close", "GET /sniff" + h11 + "Connection: close\r\n\r\n", false},
		{"post-echo", "POST /echo" + h11 + "Content-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"prompt\":\"\"}", false},
		{"post-chunked", "POST /echo" + h11 + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", false},
		{"expect-continue", "POST /echo" + h11 + "Expect: 100-continue\r\nContent-Length: 2\r\n\r\nhi", false},
		{"expect-other", "POST /echo" + h11 + "Expect: something\r\nContent-Length: 2\r\n\r\nhi", false},
		{"pipelined", "GET /sniff" + h11 + "\r\nPOST /echo" + h11 + "Content-Length: 3\r\n\r\nabcGET /nocontent" + h11 + "\r\n", false},
		{"http10", "GET /sniff HTTP/1.0\r\n\r\n", false},
		{"http10-keepalive", "GET /sniff HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", false},
		{"http10-stream", "GET /stream HTTP/1.0\r\n\r\n", false},
		{"big", "GET /big" + h11 + "\r\n", false},
		{"stream", "GET /stream" + h11 + "\r\n", false},
		{"nocontent", "GET /nocontent" + h11 + "\r\n", false},
		{"error", "POST /error" + h11 + "Content-Length: 0\r\n\r\n", false},
		{"handler-close", "GET /close" + h11 + "\r\n", false},
		{"declared-length", "GET /length" + h11 + "\r\n", false},
		{"unread-body", "POST /unread" + h11 + "Content-Length: 10\r\n\r\n0123456789GET /nocontent" + h11 + "\r\n", false},
		{"unread-huge-body", "POST /unread" + h11 + "Content-Length: 1000000\r\n\r\n" + strings.Repeat("z", 300<<10), false},
		{"head", "HEAD /sniff" + h11 + "\r\n", false},
		{"not-found", "GET /nope" + h11 + "\r\n", false},
		{"query", "GET /query?q=a%20b" + h11 + "\r\n", false},
		{"headers", "POST /headers" + h11 + "x-test:  v1 \r\ncontent-type: text/plain\r\nContent-Length: 0\r\n\r\n", false},
		{"abort", "GET /abort" + h11 + "\r\n", false},
		{"no-host", "GET /sniff HTTP/1.1\r\n\r\n", false},
		{"two-hosts", "GET /sniff" + h11 + "Host: y\r\n\r\n", false},
		{"bad-line", "GARBAGE\r\n\r\n", false},
		{"bad-version", "GET /sniff HTTP/9.9\r\nHost: x\r\n\r\n", false},
		{"bad-header", "GET /sniff" + h11 + "Bad Key: v\r\n\r\n", false},
		{"bad-te", "POST /echo" + h11 + "Transfer-Encoding: gzip\r\n\r\n", false},
		{"bad-cl", "POST /echo" + h11 + "Content-Length: x\r\n\r\n", false},
		{"te-and-cl", "POST /echo" + h11 + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n", false},
		{"chunked-http10", "POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", false},
		{"chunked-trailer", "POST /echo" + h11 + "Transfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-T: 1\r\n\r\nGET /nocontent" + h11 + "\r\n", false},
		{"expect-http10", "POST /echo HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi", false},
		{"bad-value", "GET /sniff" + h11 + "X-A: a\x01b\r\n\r\n", false},
		{"bad-host", "GET /sniff HTTP/1.1\r\nHost: a b\r\n\r\n", false},
		{"folded", "GET /sniff" + h11 + "X-A: a\r\n b\r\n\r\n", false},
		{"two-cl", "POST /echo" + h11 + "Content-Length: 1\r\nContent-Length: 2\r\n\r\nab", false},
		{"huge-header", "GET /sniff" + h11 + "X-Big: " + strings.Repeat("b", 8000) + "\r\n\r\n", false},
		{"half-closed", "GET /sniff" + h11 + "\r\n", true},
		{"short-body", "POST /echo" + h11 + "Content-Length: 10\r\n\r\nabc", true},
	}
	std, lean := servePair(t, http.HandlerFunc(testHandler), 4096)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := dateRE.ReplaceAllString(exchange(t, std, tc.raw, tc.shut), "Date: <date>\r\n")
			got := dateRE.ReplaceAllString(exchange(t, lean, tc.raw, tc.shut), "Date: <date>\r\n")
			if got != want {
				t.Fatalf("lean server answered\n%q\nnet/http answered\n%q", got, want)
			}
			golden(t, filepath.Join("testdata", "wire", tc.name+".txt"), got)
		})
	}
}

// golden compares got with the file at path (rewritten when
// SLUICE_UPDATE_GOLDEN is set).
func golden(t *testing.T, path, got string) {
	t.Helper()
	if os.Getenv("SLUICE_UPDATE_GOLDEN") != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (SLUICE_UPDATE_GOLDEN=1 writes it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s: got\n%q\nwant\n%q", path, got, want)
	}
}

// TestClientGoneCancels: a client that closes its connection while the
// handler runs cancels the request's context (the epoll watcher), as
// net/http's background read does; a pipelined request is not a close.
func TestClientGoneCancels(t *testing.T) {
	started := make(chan struct{}, 1)
	var cancelled atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		started <- struct{}{}
		select {
		case <-r.Context().Done():
			cancelled.Add(1)
		case <-time.After(3 * time.Second):
		}
	})
	for _, name := range []string{"std", "lean"} {
		t.Run(name, func(t *testing.T) {
			cancelled.Store(0)
			std, lean := servePair(t, h, 0)
			addr := map[string]string{"std": std, "lean": lean}[name]
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.WriteString(c, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
			<-started
			t0 := time.Now()
			_ = c.Close()
			for cancelled.Load() == 0 && time.Since(t0) < 2*time.Second {
				time.Sleep(5 * time.Millisecond)
			}
			if cancelled.Load() != 1 {
				t.Fatalf("request context not cancelled %v after the client closed", time.Since(t0))
			}
		})
	}
}

// TestShutdown: Shutdown closes idle connections at once, lets a
// response in flight end (with Connection: close), then returns; Serve
// returns ErrServerClosed; no goroutine is left.
func TestShutdown(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	release := make(chan struct{})
	inFlight := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(inFlight)
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: h, IdleTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- s.Serve(rawsock.Listener(ln)) }()
	addr := ln.Addr().String()
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	_, _ = io.WriteString(idle, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
	buf := make([]byte, 4096)
	if n, err := idle.Read(buf); err != nil || !bytes.Contains(buf[:n], []byte("\r\n\r\nok")) {
		t.Fatalf("first response %q %v", buf[:n], err)
	}
	busy, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, _ = io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-inFlight
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	_ = idle.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := idle.Read(buf); err == nil {
		t.Fatalf("idle connection got %q after Shutdown, want it closed", buf[:n])
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with a response in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	out, _ := io.ReadAll(busy)
	if !bytes.Contains(out, []byte("Connection: close\r\n")) || !bytes.HasSuffix(out, []byte("ok")) {
		t.Fatalf("response in flight %q", out)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
}

// TestIdleTimeout: a kept connection with no request closes after
// IdleTimeout; a request head that does not complete within
// ReadHeaderTimeout closes the connection without an answer.
func TestIdleTimeout(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: h, IdleTimeout: 200 * time.Millisecond, ReadHeaderTimeout: 200 * time.Millisecond}
	go func() { _ = s.Serve(rawsock.Listener(ln)) }()
	defer s.Close()
	for _, raw := range []string{"", "GET / HTTP/1.1\r\nHost"} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, raw)
		t0 := time.Now()
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		out, err := io.ReadAll(c)
		c.Close()
		if err != nil || len(out) != 0 {
			t.Fatalf("%q: got %q, %v; want a quiet close", raw, out, err)
		}
		if d := time.Since(t0); d < 150*time.Millisecond || d > 2*time.Second {
			t.Fatalf("%q: closed after %v, want ≈ 200 ms", raw, d)
		}
	}
}

// deadlineConn records the read deadlines set on it.
type deadlineConn struct {
	net.Conn
	sets []time.Time
}

func (d *deadlineConn) SetReadDeadline(t time.Time) error { d.sets = append(d.sets, t); return nil }
func (d *deadlineConn) Read(p []byte) (int, error)        { return 0, io.EOF }

// TestDeadlineReader checks that deadlines asked for reach the socket
// only before a read, as the last one asked for, and only when it differs
// from the socket's.
func TestDeadlineReader(t *testing.T) {
	t1, t2 := time.Unix(100, 0), time.Unix(200, 0)
	for _, tc := range []struct {
		name string
		ops  []any // a time.Time: SetReadDeadline; "read": Read
		want []time.Time
	}{
		{"none", []any{"read"}, nil},
		{"set then read", []any{t1, "read"}, []time.Time{t1}},
		{"no read, nothing set", []any{t1, time.Time{}, t2}, nil},
		{"last one wins", []any{t1, time.Time{}, t2, time.Time{}, "read"}, nil},
		{"changed back", []any{t1, "read", t2, t1, "read"}, []time.Time{t1}},
		{"cleared", []any{t1, "read", time.Time{}, "read", "read"}, []time.Time{t1, {}}},
		{"each request", []any{t1, "read", time.Time{}, t2, time.Time{}, t2, "read"}, []time.Time{t1, t2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &deadlineConn{}
			d := deadlineReader{conn: c}
			for _, op := range tc.ops {
				switch op := op.(type) {
				case time.Time:
					d.SetReadDeadline(op)
				case string:
					_, _ = d.Read(make([]byte, 1))
				}
			}
			if !slices.EqualFunc(c.sets, tc.want, time.Time.Equal) {
				t.Errorf("deadlines set %v, want %v", c.sets, tc.want)
			}
		})
	}
}
