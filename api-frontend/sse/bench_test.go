package sse

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkKeptRequest serves one streamed request at a time on a kept
// rawsock connection, as api-frontend does: the handler reads the body,
// starts the stream (the head), sends one chunk and ends it; the client
// (a raw loopback connection in the same process) sends the next request
// once the previous response has ended. It reports the process's CPU
// (server and client, user and system, from getrusage) per request; the
// client's share is the same for any server code, so two builds compare.
func BenchmarkKeptRequest(b *testing.B) {
	url, _ := heldServer(b, func(w http.ResponseWriter, r *http.Request) {
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
	})
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	const body = `{"prompt":"hi","stream":true}`
	req := []byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 29\r\n\r\n" + body)
	buf := make([]byte, 4096)
	var got []byte
	one := func() {
		if _, err := conn.Write(req); err != nil {
			b.Fatal(err)
		}
		got = got[:0]
		for !bytes.HasSuffix(got, []byte("\r\n0\r\n\r\n")) {
			n, err := conn.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			got = append(got, buf[:n]...)
		}
	}
	for range 100 {
		one() // warm up
	}
	var r0, r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	b.ResetTimer()
	for range b.N {
		one()
	}
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := func(r *syscall.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	b.ReportMetric(float64((cpu(&r1)-cpu(&r0)).Microseconds())/float64(b.N), "cpu-us/request")
	b.ReportMetric(float64(time.Duration(r1.Stime.Nano()-r0.Stime.Nano()).Microseconds())/float64(b.N), "sys-us/request")
}
