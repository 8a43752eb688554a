package sse

import (
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHeldHead covers the head httpserve holds for the first chunk
// (keptSSE.holdHead): no cork; the head leaves with the first chunk in
// one send, alone once headWait passed without one (HeadDue, then
// WriteRaw(nil)), or with the end when the stream ends first; a first
// chunk the socket takes only part of still arrives whole after the
// head. Each case runs twice on one connection.
func TestHeldHead(t *testing.T) {
	big := strings.Repeat("x", 4<<20)
	tests := []struct {
		name string
		// serve writes the stream after Start; events is what the client
		// must get, in order. firstRead gets a value each time the client
		// has done its first read of a response.
		serve  func(t *testing.T, c Conn, b *[]byte, firstRead <-chan struct{})
		events string
		// together: the head and these bytes arrive in the first read.
		together string
		// alone: the head arrives by itself, after at least headWait.
		alone bool
	}{
		{"first chunk", func(t *testing.T, c Conn, b *[]byte, _ <-chan struct{}) {
			s := c.Sender()
			*b = append((*b)[:Headroom], "data: one\n\n"...)
			if n, err := s.TrySend(s.Frame(b, false)); err != nil || n != len("b\r\ndata: one\n\n\r\n") {
				t.Errorf("TrySend: %d, %v", n, err)
			}
			*b = append((*b)[:Headroom], "data: [DONE]\n\n"...)
			if err := c.Write(b, true); err != nil {
				t.Error(err)
			}
		}, "data: one\n\ndata: [DONE]\n\n", "b\r\ndata: one\n\n\r\n", false},
		{"head alone", func(t *testing.T, c Conn, b *[]byte, firstRead <-chan struct{}) {
			select {
			case <-c.(interface{ HeadDue() <-chan struct{} }).HeadDue():
			case <-time.After(10 * time.Second):
				t.Error("HeadDue did not fire")
			}
			if err := c.WriteRaw(nil); err != nil {
				t.Error(err)
			}
			// The client's first read gets the head alone: send the chunk
			// only after that read (a fixed 50 ms sleep let both arrive
			// together when the client ran late on a loaded machine).
			select {
			case <-firstRead:
			case <-time.After(10 * time.Second):
				t.Error("the client did not read the head")
			}
			s := c.Sender()
			*b = append((*b)[:Headroom], "data: one\n\n"...)
			if n, err := s.TrySend(s.Frame(b, false)); err != nil || n == 0 {
				t.Errorf("TrySend: %d, %v", n, err)
			}
			*b = append((*b)[:Headroom], "data: [DONE]\n\n"...)
			if err := c.Write(b, true); err != nil {
				t.Error(err)
			}
		}, "data: one\n\ndata: [DONE]\n\n", "", true},
		{"end first", func(t *testing.T, c Conn, b *[]byte, _ <-chan struct{}) {
			*b = append((*b)[:Headroom], "data: [DONE]\n\n"...)
			if err := c.Write(b, true); err != nil {
				t.Error(err)
			}
		}, "data: [DONE]\n\n", "e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n", false},
		{"partial first chunk", func(t *testing.T, c Conn, b *[]byte, _ <-chan struct{}) {
			s := c.Sender()
			*b = append((*b)[:Headroom], big...)
			f := s.Frame(b, false)
			n, err := s.TrySend(f)
			if err != nil && err != syscall.EAGAIN || n >= len(f) {
				t.Errorf("TrySend of %d bytes on a small socket buffer: %d, %v", len(f), n, err)
			}
			if err := c.WriteRaw(f[n:]); err != nil { // the handler's part (the stream's writer rule)
				t.Error(err)
			}
			*b = append((*b)[:Headroom], "data: [DONE]\n\n"...)
			if err := c.Write(b, true); err != nil {
				t.Error(err)
			}
		}, big + "data: [DONE]\n\n", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			firstRead := make(chan struct{}, 2)
			url := httpserveServe(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c, err := Start(w, r, 64<<10)
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				if k, ok := c.(*keptSSE); !ok || k.corked.Load() || len(k.held) == 0 {
					t.Errorf("Start gave %T, want a kept Conn holding the head uncorked", c)
				}
				b := GetBuf()
				defer PutBuf(b)
				tc.serve(t, c, b, firstRead)
			}))
			conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			for i := 0; i < 2; i++ {
				t0 := time.Now()
				if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
					t.Fatal(err)
				}
				_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
				buf := make([]byte, 64<<10)
				n, err := conn.Read(buf)
				if err != nil {
					t.Fatal(err)
				}
				firstRead <- struct{}{}
				first := string(buf[:n])
				head, rest, ok := strings.Cut(first, "\r\n\r\n")
				if !ok || !strings.HasPrefix(head, "HTTP/1.1 200 OK\r\n") || !strings.Contains(head, "Transfer-Encoding: chunked") {
					t.Fatalf("request %d: first read %q, want the head", i, first)
				}
				if !strings.HasPrefix(rest, tc.together) {
					t.Fatalf("request %d: first read %q, want the head with %q", i, first, tc.together)
				}
				if waited := time.Since(t0); tc.alone && (rest != "" || waited < headWait*3/4) {
					t.Fatalf("request %d: first read %q after %v, want the head alone after %v", i, first, waited, headWait)
				}
				got := rest
				for !strings.HasSuffix(got, "\r\n0\r\n\r\n") {
					n, err := conn.Read(buf)
					if err != nil {
						t.Fatalf("request %d: read: %v after %d bytes", i, err, len(got))
					}
					got += string(buf[:n])
				}
				if body := unchunk(t, got); body != tc.events {
					t.Fatalf("request %d: body of %d bytes (%.60q...), want %d (%.60q...)", i, len(body), body, len(tc.events), tc.events)
				}
			}
		})
	}
}

// unchunk decodes a chunked body that ends with its terminating chunk.
func unchunk(t *testing.T, s string) string {
	t.Helper()
	var out strings.Builder
	for {
		line, rest, ok := strings.Cut(s, "\r\n")
		if !ok {
			t.Fatalf("chunk size line missing in %.80q", s)
		}
		var n int
		for _, ch := range line {
			switch {
			case '0' <= ch && ch <= '9':
				n = n*16 + int(ch-'0')
			case 'a' <= ch && ch <= 'f':
				n = n*16 + int(ch-'a'+10)
			default:
				t.Fatalf("bad chunk size %q", line)
			}
		}
		if n == 0 {
			return out.String()
		}
		if len(rest) < n+2 || rest[n:n+2] != "\r\n" {
			t.Fatalf("chunk of %d bytes cut short", n)
		}
		out.WriteString(rest[:n])
		s = rest[n+2:]
	}
}
