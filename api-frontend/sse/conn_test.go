package sse

import (
	"bytes"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
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
