package httpserve

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
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
		c := newHeadConn(raw)
		if got, err := c.readHead(); err == nil {
			sameAsNetHTTP(t, raw, got)
		}
	})
}

// FuzzReadHeadTwice reads head b on a connection that has read head a
// before, so that b's fields meet the values readHead keeps from a: b
// must parse as it does on a fresh connection (and as net/http reads it).
func FuzzReadHeadTwice(f *testing.F) {
	common := "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nUser-Agent: Go-http-client/1.1\r\n" +
		"Content-Length: %d\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n"
	for _, p := range [][2]string{
		{fmt.Sprintf(common, 13), fmt.Sprintf(common, 120)},
		{fmt.Sprintf(common, 13), "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nUser-Agent: Go-http-client/1.1\r\n\r\n"},
		{"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nX-A: 2\r\n\r\n", "GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nX-A: 3\r\n\r\n"},
		{"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a b\r\n\r\n"},
	} {
		f.Add([]byte(p[0]), []byte(p[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		c := newHeadConn(a)
		_, _ = c.readHead()
		c.br.Reset(fakeConn{r: bytes.NewReader(b)})
		got, err := c.readHead()
		fresh, ferr := newHeadConn(b).readHead()
		if (err == nil) != (ferr == nil) {
			t.Fatalf("after %q, %q: error %v; on a fresh connection %v", a, b, err, ferr)
		}
		if err != nil {
			return
		}
		if !reflect.DeepEqual(got.Header, fresh.Header) || got.RequestURI != fresh.RequestURI || got.Host != fresh.Host {
			t.Fatalf("after %q, %q: %s %v; on a fresh connection %s %v", a, b, got.RequestURI, got.Header, fresh.RequestURI, fresh.Header)
		}
		sameAsNetHTTP(t, b, got)
	})
}

// newHeadConn is a connection reading raw, for readHead.
func newHeadConn(raw []byte) *conn {
	c := &conn{srv: &Server{MaxHeaderBytes: 4096}, rwc: fakeConn{r: bytes.NewReader(raw)}}
	c.br = bufio.NewReaderSize(c.rwc, 4096)
	c.bw = bufio.NewWriter(io.Discard)
	c.w.c = c
	return c
}

// sameAsNetHTTP checks that net/http reads head raw as readHead did (got).
func sameAsNetHTTP(t *testing.T, raw []byte, got *http.Request) {
	t.Helper()
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
}

// TestReadHeadAllocs counts readHead's allocations for heads the
// frontend's clients send, on a connection that read the same kind of
// head before (a kept connection's usual request).
func TestReadHeadAllocs(t *testing.T) {
	goClient := "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nUser-Agent: Go-http-client/1.1\r\n" +
		"Content-Length: %d\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n"
	for _, tc := range []struct {
		name  string
		heads [2]string
		max   float64
	}{
		// the map (two), its value array, the URL
		{"same fields", [2]string{fmt.Sprintf(goClient, 120), fmt.Sprintf(goClient, 120)}, 4},
		// and the new values' string
		{"new length", [2]string{fmt.Sprintf(goClient, 120), fmt.Sprintf(goClient, 130)}, 5},
		// and the target
		{"new target", [2]string{fmt.Sprintf(goClient, 120), strings.Replace(fmt.Sprintf(goClient, 120), "completions", "models", 1)}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newHeadConn([]byte(tc.heads[0]))
			if _, err := c.readHead(); err != nil {
				t.Fatal(err)
			}
			prev, target := slices.Clone(c.prev), c.lastTarget
			r := strings.NewReader(tc.heads[1])
			var rd io.Reader = fakeConn{r: r} // boxed once, outside the count
			got := testing.AllocsPerRun(200, func() {
				c.prev, c.lastTarget = append(c.prev[:0], prev...), target // as after heads[0]
				r.Reset(tc.heads[1])
				c.br.Reset(rd)
				if _, err := c.readHead(); err != nil {
					t.Fatal(err)
				}
			})
			t.Logf("%.0f allocations", got)
			if got > tc.max {
				t.Errorf("%.1f allocations, want at most %.0f", got, tc.max)
			}
		})
	}
}

// TestWriteBodyAllocs checks that writing a chunk of a chunked body
// allocates nothing (the chunk's size line once escaped to the heap).
func TestWriteBodyAllocs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		chunked bool
		size    int
	}{
		{"chunked small", true, 150},
		{"chunked large", true, 9000}, // larger than the writer's buffer: written through
		{"plain", false, 150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newHeadConn(nil)
			c.w.chunked, c.w.headSent = tc.chunked, true
			p := bytes.Repeat([]byte("x"), tc.size)
			if got := testing.AllocsPerRun(200, func() {
				if err := c.w.writeBody(p); err != nil {
					t.Fatal(err)
				}
			}); got != 0 {
				t.Errorf("%.1f allocations per chunk, want 0", got)
			}
		})
	}
}

// FuzzParseTarget checks parseTarget against url.ParseRequestURI, which
// it stands for: the same URL, or an error from both.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"/", "/v1/completions", "/v1/chat/completions", "//x", "/a/../b", "/~u_v-w.x",
		"/q?a=b", "/%41", "/a b", "*", "", "http://h/p", "/a#f", "/a:b", "/é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		got, err := parseTarget(target)
		want, werr := url.ParseRequestURI(target)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: error %v, url.ParseRequestURI %v", target, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %#v, url.ParseRequestURI %#v", target, got, want)
		}
	})
}

// TestSendHeadAllocs checks that a streamed response's head (the SSE
// fields, chunked) is written without allocating.
func TestSendHeadAllocs(t *testing.T) {
	c := newHeadConn([]byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"))
	req, err := c.readHead()
	if err != nil {
		t.Fatal(err)
	}
	c.setBody(req)
	vals := []string{"text/event-stream"}
	got := testing.AllocsPerRun(200, func() {
		c.w.reset(req)
		c.w.hdr["Content-Type"] = vals
		c.w.WriteHeader(http.StatusOK)
		if err := c.w.sendHead(false); err != nil {
			t.Fatal(err)
		}
	})
	if got != 0 {
		t.Errorf("%.1f allocations per head, want 0", got)
	}
}

// FuzzTrimBlanks checks trimBlanks against bytes.Trim(b, " \t").
func FuzzTrimBlanks(f *testing.F) {
	for _, s := range []string{"", " ", "\t\t", " a ", "\ta b\t ", "ab", " \t\r\n "} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := trimBlanks(b), bytes.Trim(b, " \t"); !bytes.Equal(got, want) {
			t.Fatalf("trimBlanks(%q) = %q, want %q", b, got, want)
		}
	})
}
