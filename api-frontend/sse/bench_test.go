package sse

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkKeptRequest serves one streamed request at a time on a kept
// rawsock connection, as api-frontend does: the handler reads the body,
// starts the stream (the head), sends one chunk and ends it. The client is
// a separate process (this test binary run as TestKeptRequestClient) that
// sends the next request on the same connection once the previous
// response has ended, so the benchmark process's CPU (user and system,
// getrusage) is the server's alone: it reports it per request.
func BenchmarkKeptRequest(b *testing.B) {
	url, _ := rawServer(b, keptRequestHandler(b))
	keptRequestRun(b, url)
}

// keptRequestHandler is BenchmarkKeptRequest's handler: read the body,
// start the stream (the head), send one chunk, end it.
func keptRequestHandler(b *testing.B) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			b.Error(err)
			return
		}
		c, err := Start(w, r, 0)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		buf := GetBuf()
		defer PutBuf(buf)
		*buf = append((*buf)[:Headroom], "data: {\"choices\":[{\"text\":\"hi\"}]}\n\n"...)
		s := c.Sender()
		if _, err := s.TrySend(s.Frame(buf, false)); err != nil {
			b.Error(err)
		}
		*buf = append((*buf)[:Headroom], "data: [DONE]\n\n"...)
		if err := c.Write(buf, true); err != nil {
			b.Error(err)
		}
	}
}

// keptRequestRun runs the client process against the server at url
// (warm-up, then b.N requests) and reports the benchmark process's CPU
// per request.
func keptRequestRun(b *testing.B, url string) {
	run := func(n int) time.Duration {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestKeptRequestClient$")
		cmd.Env = append(os.Environ(), "SSE_BENCH_CLIENT="+strings.TrimPrefix(url, "http://"), "SSE_BENCH_N="+strconv.Itoa(n))
		var r0, r1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("client: %v\n%s", err, out)
		}
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
		return time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
	}
	run(100) // warm up
	b.ResetTimer()
	cpu := run(b.N)
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "server-cpu-us/request")
}

// TestKeptRequestClient is BenchmarkKeptRequest's client process (it
// skips unless run by the benchmark): SSE_BENCH_N streamed requests, one
// at a time, on one connection to SSE_BENCH_CLIENT, each read to its end.
func TestKeptRequestClient(t *testing.T) {
	addr := os.Getenv("SSE_BENCH_CLIENT")
	if addr == "" {
		t.Skip("the client process of BenchmarkKeptRequest")
	}
	n, err := strconv.Atoi(os.Getenv("SSE_BENCH_N"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const body = `{"prompt":"hi","stream":true}`
	req := []byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	end := []byte("\r\n0\r\n\r\n")
	buf := make([]byte, 4096)
	var got []byte
	for range n {
		if _, err := conn.Write(req); err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for !bytes.HasSuffix(got, end) {
			k, err := conn.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, buf[:k]...)
		}
		if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.Contains(got, []byte("data: [DONE]")) {
			t.Fatalf("response %q", got)
		}
	}
}
