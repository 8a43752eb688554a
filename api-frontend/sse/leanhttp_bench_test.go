package sse

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/api-frontend/httpserve"
	"github.com/sluice-llm/sluice/api-frontend/rawsock"
)

// BenchmarkKeptRequestLean is BenchmarkKeptRequest (same client process,
// same handler, rawsock listener, ConnContext) served by
// api-frontend/httpserve as api-frontend --http-server lean runs it
// (timeouts, ConnContext): the per-request CPU of the lean server against
// net/http's, run alternately with BenchmarkKeptRequest (issue 23 item 6).
// The prototype that chose its design (a background read per request, one
// epoll set per server, no detection) was measured at commit 0aec0fe and
// removed once httpserve replaced it; its figures are in
// docs/bench/frontend.md.
func BenchmarkKeptRequestLean(b *testing.B) {
	b.Run("httpserve", func(b *testing.B) {
		keptRequestRun(b, httpserveServe(b, keptRequestHandler(b)))
	})
}

// httpserveServe serves h with httpserve on a loopback rawsock listener.
func httpserveServe(b testing.TB, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := &httpserve.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second, ConnContext: ConnContext}
	go func() { _ = s.Serve(rawsock.Listener(ln)) }()
	b.Cleanup(func() { _ = s.Close() })
	return "http://" + ln.Addr().String()
}
