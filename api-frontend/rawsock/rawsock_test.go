package rawsock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// listen returns a wrapped loopback listener.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return Listener(ln)
}

// accept dials l and returns both ends.
func accept(t *testing.T, l net.Listener) (server net.Conn, client net.Conn) {
	t.Helper()
	done := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			done <- nil
			return
		}
		done <- c
	}()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-done
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

func TestAcceptWraps(t *testing.T) {
	s, _ := accept(t, listen(t))
	c, ok := s.(*Conn)
	if !ok {
		t.Fatalf("accepted %T, want *rawsock.Conn", s)
	}
	// The methods net/http and package sse look for stay reachable.
	if _, ok := s.(interface{ CloseWrite() error }); !ok {
		t.Error("no CloseWrite")
	}
	if _, ok := s.(syscall.Conn); !ok {
		t.Error("no SyscallConn")
	}
	if _, ok := s.(interface{ SetWriteBuffer(int) error }); !ok {
		t.Error("no SetWriteBuffer")
	}
	if c.TCPConn == nil {
		t.Error("no TCPConn")
	}
}

// pipeListener is a listener whose connections are not TCP.
type pipeListener struct{ c chan net.Conn }

func (p pipeListener) Accept() (net.Conn, error) { return <-p.c, nil }
func (p pipeListener) Close() error              { return nil }
func (p pipeListener) Addr() net.Addr            { return &net.UnixAddr{Name: "pipe"} }

func TestAcceptPassesOtherConns(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	pl := pipeListener{c: make(chan net.Conn, 1)}
	pl.c <- a
	got, err := Listener(pl).Accept()
	if err != nil || got != a {
		t.Fatalf("Accept = %v, %v; want the pipe unchanged", got, err)
	}
}

// TestReadWrite moves data both ways in sizes that fill the socket
// buffers, so that Write waits for room and Read for data (the poller
// paths), and checks every byte, then EOF after the peer closes.
func TestReadWrite(t *testing.T) {
	cases := []struct {
		name string
		size int
	}{
		{"one byte", 1},
		{"small", 300},
		{"larger than the socket buffers", 8 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, c := accept(t, listen(t))
			data := make([]byte, tc.size)
			for i := range data {
				data[i] = byte(i * 7)
			}
			var wg sync.WaitGroup
			var got []byte
			var rerr error
			wg.Add(1)
			go func() { // the client reads slowly at first: Write must wait
				defer wg.Done()
				time.Sleep(20 * time.Millisecond)
				got, rerr = io.ReadAll(c)
			}()
			n, err := s.Write(data)
			if err != nil || n != len(data) {
				t.Fatalf("Write = %d, %v; want %d", n, err, len(data))
			}
			s.(*Conn).CloseWrite()
			wg.Wait()
			if rerr != nil || !bytes.Equal(got, data) {
				t.Fatalf("client read %d bytes (%v), want %d equal", len(got), rerr, len(data))
			}
			// The other way: the server's Read waits for the data.
			go func() {
				time.Sleep(20 * time.Millisecond)
				c.Write(data)
				c.Close()
			}()
			back, err := io.ReadAll(s)
			if err != nil || !bytes.Equal(back, data) {
				t.Fatalf("server read %d bytes (%v), want %d equal", len(back), err, len(data))
			}
			if n, err := s.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Fatalf("Read after EOF = %d, %v; want 0, EOF", n, err)
			}
		})
	}
}

// TestDeadlines: a read with nothing to read and a write the peer never
// drains end at their deadlines with a timeout net.Error, as net/http
// needs (its idle, header and body timeouts, and its background read's
// abort).
func TestDeadlines(t *testing.T) {
	s, _ := accept(t, listen(t))
	s.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	start := time.Now()
	_, err := s.Read(make([]byte, 10))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read = %v; want a timeout", err)
	}
	if d := time.Since(start); d < 25*time.Millisecond {
		t.Fatalf("Read returned after %v, before its deadline", d)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("Read error %#v; want a *net.OpError with Op read", err)
	}
	// A deadline in the past interrupts a Read that is waiting (net/http's
	// abortPendingRead).
	s.SetReadDeadline(time.Time{})
	errc := make(chan error, 1)
	go func() { _, err := s.Read(make([]byte, 10)); errc <- err }()
	time.Sleep(20 * time.Millisecond)
	s.SetReadDeadline(time.Unix(1, 0))
	select {
	case err := <-errc:
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("interrupted Read = %v; want a timeout", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read not interrupted by a past deadline")
	}
	big := make([]byte, 64<<20) // more than the socket buffers take
	s.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	n, err := s.Write(big) // nobody reads
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Write = %d, %v; want a timeout", n, err)
	}
	if n >= len(big) {
		t.Fatalf("Write wrote %d bytes before its timeout; want fewer than %d", n, len(big))
	}
}

// TestClosed: reads and writes on a closed Conn fail with net.ErrClosed;
// a write to a peer that closed fails (EPIPE or ECONNRESET) without a
// SIGPIPE.
func TestClosed(t *testing.T) {
	s, c := accept(t, listen(t))
	c.Close()
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = s.Write(make([]byte, 1<<16))
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Write to a closed peer = %v; want EPIPE or ECONNRESET", err)
	}
	s.Close()
	if _, err := s.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read after Close = %v; want net.ErrClosed", err)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close = %v; want net.ErrClosed", err)
	}
}

// TestHTTPServer serves keep-alive requests with bodies and a streamed
// response through net/http on the wrapped listener.
func TestHTTPServer(t *testing.T) {
	ln := listen(t)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for i := 0; i < 3; i++ {
			fmt.Fprintf(w, "%d:%d;", i, len(body))
			w.(http.Flusher).Flush()
		}
	}), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	defer hs.Shutdown(context.Background())
	var conns int
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conns++
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for _, size := range []int{0, 10, 1 << 20} {
		resp, err := client.Post("http://"+ln.Addr().String()+"/", "text/plain", strings.NewReader(strings.Repeat("a", size)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := fmt.Sprintf("0:%d;1:%d;2:%d;", size, size, size)
		if err != nil || string(got) != want {
			t.Fatalf("body %q (%v), want %q", got, err, want)
		}
	}
	if conns != 1 {
		t.Fatalf("%d connections for 3 requests; want 1 (kept alive)", conns)
	}
}
