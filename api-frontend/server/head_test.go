package server

import (
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStreamHeadOnTheWire reads a streamed /v1/completions response off a
// raw loopback connection to the server as api-frontend serves it
// (rawsock listener, kept connections): with a prompt first token the
// head and the first chunk arrive in one read; with a slow first token the
// head arrives alone before it (the kernel sends a corked head after at
// most 200 ms); a request refused before streaming gets its own status.
// Each case then sends a second request on the same connection.
func TestStreamHeadOnTheWire(t *testing.T) {
	const stream = `{"prompt":"hi","max_tokens":3,"stream":true}`
	tests := []struct {
		name string
		step time.Duration // the fake engine's step: the first token comes one or two steps after ADD
		body string
		// first is checked against the first read.
		first func(t *testing.T, first string, waited time.Duration)
	}{
		{"fast first token", time.Millisecond, stream, func(t *testing.T, first string, _ time.Duration) {
			if !strings.HasPrefix(first, "HTTP/1.1 200 OK\r\n") || !strings.Contains(first, "\r\n\r\n") ||
				!strings.Contains(first[strings.Index(first, "\r\n\r\n"):], "data: {") {
				t.Fatalf("first read %q: want the head and the first chunk together", first)
			}
		}},
		{"slow first token", 600 * time.Millisecond, stream, func(t *testing.T, first string, waited time.Duration) {
			if !strings.HasPrefix(first, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(first, "\r\n\r\n") {
				t.Fatalf("first read %q: want the head alone", first)
			}
			t.Logf("head alone after %v", waited.Round(time.Millisecond))
		}},
		{"refused before streaming", time.Millisecond, `{"prompt":"hi","max_tokens":-1,"stream":true}`, func(t *testing.T, first string, _ time.Duration) {
			if !strings.HasPrefix(first, "HTTP/1.1 400 ") || !strings.Contains(first, "application/json") {
				t.Fatalf("first read %q: want a 400 with a JSON error", first)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnvStep(t, Config{}, "The quick brown fox.", tc.step)
			conn, err := net.Dial("tcp", strings.TrimPrefix(env.http.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			post := func(body string) time.Time {
				t.Helper()
				req := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
					strconv.Itoa(len(body)) + "\r\n\r\n" + body
				t0 := time.Now()
				if _, err := io.WriteString(conn, req); err != nil {
					t.Fatal(err)
				}
				return t0
			}
			buf := make([]byte, 64<<10)
			t0 := post(tc.body)
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := conn.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			tc.first(t, string(buf[:n]), time.Since(t0))
			// Read this response to its end, then the connection serves a
			// streamed request.
			end := "\r\n0\r\n\r\n" // chunked end
			if strings.HasPrefix(string(buf[:n]), "HTTP/1.1 400") {
				end = "}"
			}
			got := string(buf[:n])
			for !strings.HasSuffix(got, end) {
				n, err := conn.Read(buf)
				if err != nil {
					t.Fatalf("read: %v after %q", err, got)
				}
				got += string(buf[:n])
			}
			post(stream)
			got = ""
			for !strings.HasSuffix(got, "\r\n0\r\n\r\n") {
				n, err := conn.Read(buf)
				if err != nil {
					t.Fatalf("second request: %v after %q", err, got)
				}
				got += string(buf[:n])
			}
			if !strings.HasPrefix(got, "HTTP/1.1 200 OK\r\n") || !strings.Contains(got, "data: [DONE]\n\n") {
				t.Fatalf("second request: %q", got)
			}
		})
	}
}
