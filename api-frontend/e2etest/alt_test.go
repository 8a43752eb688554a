package e2etest

import (
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestBodyEnd checks benchmarkAlt's reader of chunked responses: the
// terminator is found however the response is cut into reads, not
// before, and a status other than 200 is an error.
func TestBodyEnd(t *testing.T) {
	const resp = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"6\r\ndata: \r\n" + "e\r\ndata: [DONE]\n\n\r\n" + "0\r\n\r\n"
	for _, tc := range []struct {
		name string
		cuts []int // read boundaries
	}{
		{"one read", nil},
		{"each byte", func() []int {
			var c []int
			for i := 1; i < len(resp); i++ {
				c = append(c, i)
			}
			return c
		}()},
		{"terminator split", []int{len(resp) - 4}},
		{"last byte alone", []int{len(resp) - 1}},
		{"head alone", []int{strings.Index(resp, "\r\n\r\n") + 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e bodyEnd
			for round := 0; round < 2; round++ { // a kept connection's second response
				e.reset()
				prev := 0
				for i, cut := range append(tc.cuts, len(resp)) {
					done, err := e.feed([]byte(resp[prev:cut]))
					if err != nil {
						t.Fatal(err)
					}
					if last := i == len(tc.cuts); done != last {
						t.Fatalf("round %d: read %d (bytes %d..%d): done %v", round, i, prev, cut, done)
					}
					prev = cut
				}
			}
		})
	}
	var e bodyEnd
	e.reset()
	if _, err := e.feed([]byte("HTTP/1.1 400 Bad Request\r\n\r\n")); err == nil {
		t.Fatal("a 400 was taken")
	}
}

// TestMedian checks the median of odd and even counts.
func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestSendRing checks BenchmarkSendFloor's io_uring sender: one
// io_uring_enter delivers the bytes to every connection, twice in a row
// (the rings' heads and tails wrap past the first batch).
func TestSendRing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const conns = 5
	var fds []int
	var readers []net.Conn
	for i := 0; i < conns; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		readers = append(readers, c)
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		rc, err := s.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		_ = rc.Control(func(fd uintptr) { fds = append(fds, int(fd)) })
	}
	ring, err := newSendRing(4) // fewer slots than sends would need: the kernel rounds up to a power of two
	if err != nil {
		t.Skip("SKIP: io_uring unavailable: ", err)
	}
	defer ring.close()
	if int(ring.entries) < conns {
		ring.close()
		if ring, err = newSendRing(conns); err != nil {
			t.Fatal(err)
		}
	}
	for round, msg := range []string{"first batch", "second batch, longer"} {
		buf := []byte(msg)
		failed, err := ring.sendAll(fds, uintptr(unsafe.Pointer(&buf[0])), uint32(len(buf)))
		runtime.KeepAlive(buf)
		if failed != 0 || err != nil {
			t.Fatalf("round %d: %d failed: %v", round, failed, err)
		}
		for i, c := range readers {
			got := make([]byte, len(msg))
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
				t.Fatalf("round %d, connection %d: read %q, %v; want %q", round, i, got, err, msg)
			}
		}
	}
}
