package httpserve

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"reflect"
	"testing"
)

// fakeConn is a net.Conn over fixed bytes, for the head parser.
type fakeConn struct {
	net.Conn
	r io.Reader
}

func (f fakeConn) Read(p []byte) (int, error) { return f.r.Read(p) }
func (fakeConn) RemoteAddr() net.Addr         { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

// FuzzReadHead parses random request heads with readHead and with
// net/http's http.ReadRequest: no panic, and where readHead takes a head,
// net/http takes it too and sees the same method, target, protocol, host,
// length and header fields.
func FuzzReadHead(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"prompt\":\"\"}",
		"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"GET /q?a=b HTTP/1.0\r\nConnection: keep-alive\r\nX-A: a\r\n b\r\n\r\n",
		"GET / HTTP/1.1\r\nhost: x\r\nx-stainless-lang: js\r\nexpect: 100-continue\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c := &conn{srv: &Server{MaxHeaderBytes: 4096}, rwc: fakeConn{r: bytes.NewReader(raw)}}
		c.br = bufio.NewReaderSize(c.rwc, 4096)
		c.bw = bufio.NewWriter(io.Discard)
		c.w.c = c
		got, err := c.readHead()
		if err != nil {
			return
		}
		want, werr := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if werr != nil {
			t.Fatalf("readHead took %q, net/http refused it: %v", raw, werr)
		}
		if got.Method != want.Method || got.RequestURI != want.RequestURI || got.Proto != want.Proto ||
			got.Host != want.Host || got.ContentLength != want.ContentLength || got.Close != want.Close {
			t.Fatalf("%q: readHead %s %s %s host %q length %d close %v; net/http %s %s %s host %q length %d close %v", raw,
				got.Method, got.RequestURI, got.Proto, got.Host, got.ContentLength, got.Close,
				want.Method, want.RequestURI, want.Proto, want.Host, want.ContentLength, want.Close)
		}
		delete(want.Header, "Host")
		if len(got.Header) != 0 || len(want.Header) != 0 {
			if !reflect.DeepEqual(got.Header, want.Header) {
				t.Fatalf("%q: header %v, net/http %v", raw, got.Header, want.Header)
			}
		}
	})
}
