package httpserve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// readRequest waits for the connection's next request and reads its head.
// The returned request's context is cancelled by cancel (the caller's,
// when the response ends) or when the peer closes the connection.
func (c *conn) readRequest(ctx context.Context) (*http.Request, context.CancelFunc, error) {
	s := c.srv
	if s.shutting.Load() {
		return nil, nil, errClosing
	}
	idle := s.IdleTimeout
	if idle == 0 {
		idle = s.ReadHeaderTimeout
	}
	deadline := false
	if idle > 0 {
		c.rd.SetReadDeadline(time.Now().Add(idle))
		deadline = true
	}
	if _, err := c.br.Peek(1); err != nil {
		return nil, nil, err
	}
	if !c.state.CompareAndSwap(stateIdle, stateActive) {
		return nil, nil, errClosing // Shutdown closed it
	}
	if s.ReadHeaderTimeout > 0 {
		// The usual request is all in the buffer already: no deadline
		// to set for the rest of its head.
		b, _ := c.br.Peek(c.br.Buffered())
		if !bytes.Contains(b, crlfcrlf) {
			c.rd.SetReadDeadline(time.Now().Add(s.ReadHeaderTimeout))
			deadline = true
		}
	}
	req, err := c.readHead()
	if deadline {
		c.rd.SetReadDeadline(time.Time{})
	}
	if err != nil {
		return nil, nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	if c.peer != nil {
		c.peer.set(cancel)
	}
	rr := req.WithContext(rctx)
	c.req = http.Request{} // hold nothing of this request past it
	return rr, cancel, nil
}

// parseTarget is url.ParseRequestURI(target), with a fast path for the
// usual target, an absolute path of unreserved characters and slashes
// (/v1/chat/completions): ParseRequestURI returns such a path as the URL's
// Path and nothing else, after a scheme scan, an escape scan and the
// unescaping, which cost more than the rest of a short head.
func parseTarget(target string) (*url.URL, error) {
	if len(target) == 0 || target[0] != '/' {
		return url.ParseRequestURI(target)
	}
	for i := 1; i < len(target); i++ {
		if c := target[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '/' || c == '-' || c == '.' || c == '_' || c == '~') {
			return url.ParseRequestURI(target)
		}
	}
	return &url.URL{Path: target}, nil
}

var (
	crlfcrlf   = []byte("\r\n\r\n")
	errClosing = errors.New("httpserve: server closing")
)

// readLine returns the next line of the head without its CRLF (or LF);
// budget is what the head may still take.
func (c *conn) readLine(budget *int) ([]byte, error) {
	l, err := c.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		c.line = append(c.line[:0], l...)
		for err == bufio.ErrBufferFull {
			if len(c.line) > *budget {
				return nil, errTooLarge
			}
			l, err = c.br.ReadSlice('\n')
			c.line = append(c.line, l...)
		}
		l = c.line
	}
	if err != nil {
		return nil, err
	}
	if *budget -= len(l); *budget < 0 {
		return nil, errTooLarge
	}
	l = l[:len(l)-1]
	if n := len(l); n > 0 && l[n-1] == '\r' {
		l = l[:n-1]
	}
	return l, nil
}

// readHead parses the request line and header fields into a request
// (without its context). The values a connection's requests repeat (the
// target, Host, User-Agent, Content-Type...) reuse the previous request's
// strings, and the new values share one string and the fields one slice
// array, so a usual head costs a few allocations, not two per field.
func (c *conn) readHead() (*http.Request, error) {
	budget := c.srv.MaxHeaderBytes
	if budget <= 0 {
		budget = http.DefaultMaxHeaderBytes
	}
	budget += 4096 // net/http's slack for the request line
	line, err := c.readLine(&budget)
	if err != nil {
		return nil, err
	}
	method, tg, proto, ok := splitRequestLine(line)
	if !ok {
		return nil, errBadRequest
	}
	target := c.lastTarget
	if string(tg) != target {
		target = string(tg)
		c.lastTarget = target
	}
	major, minor, ok := http.ParseHTTPVersion(proto)
	if !ok {
		return nil, errBadRequest
	}
	u, err := parseTarget(target)
	if err != nil {
		return nil, errBadRequest
	}
	var nameErr error // reported in net/http's order, below
	c.fields, c.vals = c.fields[:0], c.vals[:0]
	for {
		l, err := c.readLine(&budget)
		if err != nil {
			return nil, err
		}
		if len(l) == 0 {
			break
		}
		if l[0] == ' ' || l[0] == '\t' {
			return nil, errBadRequest // a continuation with nothing before it
		}
		if l, err = c.unfold(l, &budget); err != nil {
			return nil, err
		}
		i := bytes.IndexByte(l, ':')
		if i <= 0 {
			return nil, errBadRequest
		}
		if !validKey(l[:i]) {
			nameErr = errBadHeaderName
		}
		v := l[i+1:]
		for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
			v = v[1:] // bytes.TrimLeft(v, " \t") without its cut set
		}
		if !validValue(v) {
			return nil, errBadRequest
		}
		f := headField{key: canonicalKey(l[:i]), off: -1}
		if n := len(c.fields); n < len(c.prev) && c.prev[n].key == f.key && c.prev[n].val == string(v) {
			f.val = c.prev[n].val
		} else {
			f.off = len(c.vals)
			c.vals = append(c.vals, v...)
			f.end = len(c.vals)
		}
		c.fields = append(c.fields, f)
	}
	// A new map and values per request: a handler may keep its request's
	// header.
	hdr := make(http.Header, max(len(c.fields), 8))
	if len(c.fields) > 0 {
		fresh := string(c.vals)
		vals := make([]string, len(c.fields))
		for i := range c.fields {
			f := &c.fields[i]
			if f.off >= 0 {
				f.val = fresh[f.off:f.end]
			}
			if old, ok := hdr[f.key]; ok {
				hdr[f.key] = append(old, f.val)
				continue
			}
			vals[i] = f.val
			hdr[f.key] = vals[i : i+1 : i+1]
		}
	}
	c.prev = append(c.prev[:0], c.fields...)
	if c.remote == "" {
		c.remote = c.rwc.RemoteAddr().String()
	}
	// The connection's request value; readRequest's WithContext makes the
	// handler's copy.
	r := &c.req
	*r = http.Request{
		Method: method, URL: u, Proto: proto, ProtoMajor: major, ProtoMinor: minor,
		Header: hdr, RequestURI: target, RemoteAddr: c.remote,
	}
	hosts, haveHost := hdr["Host"]
	if len(hosts) > 1 {
		return nil, errBadRequest
	}
	if major != 1 {
		return nil, errUnsupported
	}
	switch {
	case haveHost:
		if !validHost(hosts[0]) {
			return nil, errMalformedHost
		}
		r.Host = hosts[0]
		delete(hdr, "Host")
	case minor >= 1 && method != http.MethodConnect:
		return nil, errMissingHost
	}
	if nameErr != nil {
		return nil, nameErr
	}

	if r.Host == "" {
		r.Host = u.Host
	}
	conn := hdr["Connection"]
	if minor >= 1 {
		r.Close = hasToken(conn, "close")
	} else {
		r.Close = !hasToken(conn, "keep-alive")
	}
	if err := c.setBody(r); err != nil {
		return nil, err
	}
	return r, nil
}

// headField is one header field of the head being read: its value is
// val (a previous request's string) or, when off >= 0, conn.vals[off:end].
type headField struct {
	key      string
	val      string
	off, end int
}

// unfold returns header line l trimmed of blanks, joined with the
// obs-fold continuation lines after it as net/http's textproto does (each
// trimmed, after one space).
func (c *conn) unfold(l []byte, budget *int) ([]byte, error) {
	if c.br.Buffered() > 0 {
		if next, _ := c.br.Peek(1); next[0] != ' ' && next[0] != '\t' {
			return trimBlanks(l), nil
		}
	}
	c.fold = append(c.fold[:0], trimBlanks(l)...)
	for {
		next, err := c.br.Peek(1)
		if err != nil || next[0] != ' ' && next[0] != '\t' {
			return c.fold, nil
		}
		cont, err := c.readLine(budget)
		if err != nil {
			return nil, err
		}
		c.fold = append(append(c.fold, ' '), trimBlanks(cont)...)
	}
}

// trimBlanks is bytes.Trim(b, " \t") without building the cut set on
// every call (once per header field).
func trimBlanks(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	for j > i && (b[j-1] == ' ' || b[j-1] == '\t') {
		j--
	}
	return b[i:j]
}

// setBody frames the request's body from Transfer-Encoding and
// Content-Length, and Expect: 100-continue.
func (c *conn) setBody(r *http.Request) error {
	hdr := r.Header
	b := &c.w.body
	*b = body{c: c}
	if r.ProtoMinor == 0 {
		delete(hdr, "Transfer-Encoding") // as net/http: HTTP/1.0 has none
	}
	if te, ok := hdr["Transfer-Encoding"]; ok {
		if len(te) != 1 || !strings.EqualFold(te[0], "chunked") {
			return errBadTE
		}
		// chunked wins over a Content-Length (net/http drops it)
		delete(hdr, "Content-Length")
		delete(hdr, "Transfer-Encoding")
		r.TransferEncoding = chunkedTE
		r.ContentLength = -1
		b.chunked = httputil.NewChunkedReader(c.br)
		b.n = -1
	} else if cl, ok := hdr["Content-Length"]; ok {
		for _, v := range cl[1:] {
			if v != cl[0] {
				return errBadRequest
			}
		}
		n, err := strconv.ParseUint(cl[0], 10, 63)
		if err != nil {
			return errBadRequest
		}
		r.ContentLength, b.n = int64(n), int64(n)
	}
	if ex := hdr.Get("Expect"); ex != "" {
		if !strings.EqualFold(ex, "100-continue") {
			return errExpect
		}
		b.expect = r.ProtoMinor >= 1
	}
	if b.n == 0 {
		r.Body = http.NoBody
		b.expect, b.eof = false, true
	} else {
		r.Body = b
	}
	return nil
}

var chunkedTE = []string{"chunked"}

// body is a request body read from the connection's reader: n bytes
// (Content-Length) or chunked; the first Read answers Expect:
// 100-continue.
type body struct {
	c       *conn
	n       int64     // bytes left (Content-Length); -1 when chunked
	chunked io.Reader // the chunked reader, when chunked
	expect  bool      // 100 Continue not yet sent
	sentCon bool      // 100 Continue sent
	eof     bool      // read to its end
	err     error     // a read error (the connection cannot be reused)
}

// Read implements io.Reader.
func (b *body) Read(p []byte) (int, error) {
	if b.eof {
		return 0, io.EOF
	}
	if b.err != nil {
		return 0, b.err
	}
	if b.expect {
		b.expect = false
		bw := b.c.bw
		_, _ = bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		if err := bw.Flush(); err != nil {
			b.err = err
			return 0, err
		}
		b.sentCon = true
	}
	if b.chunked != nil {
		k, err := b.chunked.Read(p)
		if err == io.EOF {
			// the trailer section, up to its empty line (dropped)
			budget := http.DefaultMaxHeaderBytes
			for {
				l, lerr := b.c.readLine(&budget)
				if lerr != nil {
					b.err = lerr
					return k, lerr
				}
				if len(l) == 0 {
					break
				}
			}
			b.eof = true
		} else if err != nil {
			b.err = err
		}
		return k, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	k, err := b.c.br.Read(p)
	b.n -= int64(k)
	if b.n == 0 {
		b.eof = true
		return k, io.EOF
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		b.err = err
	}
	return k, err
}

// Close implements io.Closer (the rest of the body is dealt with when the
// response ends).
func (b *body) Close() error { return nil }

// discard reads and drops what is left of the body, up to
// bodyDiscardLimit; false when the connection cannot be reused (more
// left, an error, or a client that waits for 100 Continue).
func (b *body) discard() bool {
	if b.eof {
		return true
	}
	if b.err != nil || (b.expect && !b.sentCon) {
		return false
	}
	n, err := io.CopyN(io.Discard, b, bodyDiscardLimit+1)
	return err == io.EOF && n <= bodyDiscardLimit
}

// splitRequestLine splits "METHOD target HTTP/x.y" at its first two
// spaces, as net/http does (the protocol is the rest of the line).
func splitRequestLine(l []byte) (method string, target []byte, proto string, ok bool) {
	m, rest, ok1 := bytes.Cut(l, []byte{' '})
	tg, pr, ok2 := bytes.Cut(rest, []byte{' '})
	if !ok1 || !ok2 || !validKey(m) {
		return "", nil, "", false
	}
	switch string(m) { // the usual methods without an allocation
	case http.MethodPost:
		method = http.MethodPost
	case http.MethodGet:
		method = http.MethodGet
	default:
		method = string(m)
	}
	if string(pr) == "HTTP/1.1" {
		proto = "HTTP/1.1"
	} else {
		proto = string(pr)
	}
	return method, tg, proto, true
}

// validKey reports whether k is an HTTP token (a header name or method).
func validKey(k []byte) bool {
	for _, ch := range k {
		if ch >= 0x80 || !tokenChar[ch] {
			return false
		}
	}
	return len(k) > 0
}

// validHost reports whether h may be a Host header's value (net/http's
// httpguts.ValidHostHeader: the bytes of a URI authority).
func validHost(h string) bool {
	for i := 0; i < len(h); i++ {
		ch := h[i]
		if ch >= 0x80 || !hostChar[ch] {
			return false
		}
	}
	return true
}

// hostChar marks the bytes a Host header may hold.
var hostChar = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!$%&'()*+,-.:;=[]_~" {
		t[c] = true
	}
	return t
}()

// validValue reports whether v has no control bytes but tab.
func validValue(v []byte) bool {
	for _, ch := range v {
		if ch < ' ' && ch != '\t' || ch == 0x7f {
			return false
		}
	}
	return true
}

// tokenChar marks RFC 9110's tchar bytes.
var tokenChar = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// canonicalKey is http.CanonicalHeaderKey of k, without an allocation for
// the usual header names.
func canonicalKey(k []byte) string {
	var buf [48]byte
	if len(k) > len(buf) {
		return http.CanonicalHeaderKey(string(k))
	}
	b := buf[:len(k)]
	upper := true
	for i, ch := range k {
		switch {
		case upper && 'a' <= ch && ch <= 'z':
			ch -= 'a' - 'A'
		case !upper && 'A' <= ch && ch <= 'Z':
			ch += 'a' - 'A'
		}
		b[i] = ch
		upper = ch == '-'
	}
	if s, ok := commonKeys[string(b)]; ok {
		return s
	}
	return string(b)
}

// commonKeys interns the header names clients usually send.
var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Connection", "Content-Length", "Content-Type", "Expect", "Host", "Origin", "Referer", "Transfer-Encoding",
		"User-Agent", "X-Api-Key", "X-Request-Id", "X-Stainless-Arch", "X-Stainless-Lang", "X-Stainless-Os",
		"X-Stainless-Package-Version", "X-Stainless-Retry-Count", "X-Stainless-Runtime",
		"X-Stainless-Runtime-Version", "X-Stainless-Async", "X-Stainless-Read-Timeout", "Anthropic-Version"} {
		m[k] = k
	}
	return m
}()

// hasToken reports whether one of the comma-separated values holds token
// (case-insensitive).
func hasToken(vals []string, token string) bool {
	for _, v := range vals {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}
