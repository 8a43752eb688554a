package rawsock

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// watchServer serves handler on a wrapped loopback listener with the
// connections' contexts from WatchContext, as api-frontend serves.
func watchServer(t *testing.T, handler http.HandlerFunc) string {
	t.Helper()
	ln := listen(t)
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, ConnContext: WatchContext}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// TestWatchCancelsOnPeerClose: a request's context ends when its client
// closes, half-closes or resets the connection while the handler runs
// (net/http's background read did this per request; the watcher does it
// per connection).
func TestWatchCancelsOnPeerClose(t *testing.T) {
	tests := []struct {
		name string
		end  func(c *net.TCPConn) error
	}{
		{"close", func(c *net.TCPConn) error { return c.Close() }},
		{"half-close", func(c *net.TCPConn) error { return c.CloseWrite() }},
		{"reset", func(c *net.TCPConn) error { _ = c.SetLinger(0); return c.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			started := make(chan struct{})
			ended := make(chan error, 1)
			addr := watchServer(t, func(w http.ResponseWriter, r *http.Request) {
				if _, err := io.ReadAll(r.Body); err != nil {
					ended <- err
					return
				}
				close(started)
				select {
				case <-r.Context().Done():
					ended <- nil
				case <-time.After(10 * time.Second):
					ended <- context.DeadlineExceeded
				}
			})
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"); err != nil {
				t.Fatal(err)
			}
			<-started
			if err := tt.end(c.(*net.TCPConn)); err != nil {
				t.Fatal(err)
			}
			if err := <-ended; err != nil {
				t.Fatalf("request context not cancelled after the client's %s: %v", tt.name, err)
			}
		})
	}
}

// TestWatchKeepAliveAndPipelining: requests on one connection, kept alive
// and pipelined (the second request is in the socket while the first is
// served: net/http's background read takes its first byte), are all
// served in order, and none sees its context cancelled.
func TestWatchKeepAliveAndPipelining(t *testing.T) {
	addr := watchServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		time.Sleep(20 * time.Millisecond) // the next request arrives meanwhile
		if r.Context().Err() != nil {
			http.Error(w, "cancelled", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, r.URL.Path+":"+string(body))
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := func(path, body string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	br := bufio.NewReader(c)
	read := func(want string) {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(got) != want {
			t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, got, want)
		}
	}
	// Kept alive, one at a time.
	io.WriteString(c, req("/a", "1"))
	read("/a:1")
	// Pipelined in one write, then the next one while the first is served.
	io.WriteString(c, req("/b", "22")+req("/c", "333"))
	time.Sleep(5 * time.Millisecond)
	io.WriteString(c, req("/d", "4444"))
	read("/b:22")
	read("/c:333")
	read("/d:4444")
}

// TestReadNoWait: once the connection's context is made, a one-byte Read
// returns at once: 0 and no error when the socket is empty, the byte when
// there is one, EOF after the peer's close (which also cancels the
// context). Before, a one-byte Read waits as any Read does.
func TestReadNoWait(t *testing.T) {
	s, c := accept(t, listen(t))
	rc := s.(*Conn)
	var b [1]byte
	// Not armed: it waits (until the deadline).
	_ = rc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if n, err := rc.Read(b[:]); n != 0 || !isTimeout(err) {
		t.Fatalf("unarmed one-byte Read = %d, %v; want a timeout", n, err)
	}
	_ = rc.SetReadDeadline(time.Time{})

	ctx := rc.WatchContext(context.Background())
	if n, err := rc.Read(b[:]); n != 0 || err != nil {
		t.Fatalf("armed one-byte Read on an empty socket = %d, %v; want 0, nil", n, err)
	}
	if _, err := c.Write([]byte("xy")); err != nil {
		t.Fatal(err)
	}
	n, err := 0, error(nil)
	for deadline := time.Now().Add(5 * time.Second); n == 0 && err == nil && time.Now().Before(deadline); {
		n, err = rc.Read(b[:])
	}
	if n != 1 || err != nil || b[0] != 'x' {
		t.Fatalf("armed one-byte Read with data = %d %q, %v; want 1 \"x\"", n, b[:n], err)
	}
	// A larger Read still waits for data as before.
	big := make([]byte, 8)
	if n, err := rc.Read(big); n != 1 || err != nil || big[0] != 'y' {
		t.Fatalf("Read = %d %q, %v; want \"y\"", n, big[:n], err)
	}
	// Data sent before the close is not a close: the context stays.
	if _, err := c.Write([]byte("z")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	time.Sleep(50 * time.Millisecond)
	if ctx.Err() != nil {
		t.Fatal("context cancelled while the peer's last bytes were unread")
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		n, err = rc.Read(b[:])
		if n == 1 || err != nil || time.Now().After(deadline) {
			break
		}
	}
	if n != 1 || b[0] != 'z' {
		t.Fatalf("read %d %q, %v; want \"z\"", n, b[:n], err)
	}
	if n, err := rc.Read(b[:]); n != 0 || err != io.EOF {
		t.Fatalf("after the peer's close: %d, %v; want EOF", n, err)
	}
}

// TestWatchContextAfterClose: a peer that closed before the connection's
// context is made gets a cancelled context at once.
func TestWatchContextAfterClose(t *testing.T) {
	s, c := accept(t, listen(t))
	c.Close()
	rc := s.(*Conn)
	deadline := time.Now().Add(5 * time.Second)
	for {
		rc.mu.Lock()
		gone := rc.gone
		rc.mu.Unlock()
		if gone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not see the peer's close")
		}
		time.Sleep(time.Millisecond)
	}
	if ctx := rc.WatchContext(context.Background()); ctx.Err() == nil {
		t.Fatal("context of a connection whose peer closed is not cancelled")
	}
}

// TestWatcherLifetime: a closed Conn leaves the watcher's set, and
// closing the listener ends the watcher's goroutine.
func TestWatcherLifetime(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Listener(inner)
	l := ln.(*listener)
	if l.w == nil {
		t.Skip("no epoll on this system")
	}
	s, c := accept(t, ln)
	if s.(*Conn).w == nil {
		t.Fatal("accepted connection not watched")
	}
	s.Close()
	c.Close()
	l.w.mu.Lock()
	left := len(l.w.conns)
	l.w.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d connections left in the watcher after Close", left)
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ln.Accept(); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Accept after Close: %v", err)
	}
}

// isTimeout reports whether err is a net.Error timeout.
func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
