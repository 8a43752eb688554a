package httpserve

import (
	"net/http"
	"slices"
	"strconv"
	"time"
)

// sniffLen is how much of a body net/http buffers before it chooses
// chunked encoding (a smaller body that ends gets a Content-Length).
const sniffLen = 2048

// response is a connection's http.ResponseWriter (and http.Flusher, and
// the deadline setters http.ResponseController looks for), reset for each
// request.
type response struct {
	c    *conn
	req  *http.Request
	body body // the request's body (see conn.setBody)
	hdr  http.Header

	status      int
	wroteHeader bool  // WriteHeader (or Write) was called
	headSent    bool  // the head is in the connection's writer
	chunked     bool  // the body goes chunked
	noBody      bool  // HEAD, 1xx, 204, 304: no body bytes
	declared    int64 // the handler's Content-Length (-1: none)
	written     int64 // body bytes the handler wrote
	pending     []byte
	closeAfter  bool // close the connection once the response ends
	closeQuiet  bool // close once the response ends, without saying so in the head
	aborted     bool // a write failed: close without ending the response
	keys        []string
	// chunkHead holds a chunk's size line while writeBody writes it, and
	// the status code while sendHead writes it: a local array would escape
	// through bufio.Writer.Write (one allocation per chunk or head).
	chunkHead [18]byte
}

// reset prepares w for req.
func (w *response) reset(req *http.Request) {
	if w.hdr == nil {
		w.hdr = make(http.Header, 8)
	}
	clear(w.hdr)
	w.req = req
	w.status, w.wroteHeader, w.headSent, w.chunked, w.noBody = 0, false, false, false, false
	w.declared, w.written, w.pending = -1, 0, w.pending[:0]
	w.closeAfter, w.closeQuiet, w.aborted = req.Close, false, false
}

// Header implements http.ResponseWriter.
func (w *response) Header() http.Header { return w.hdr }

// WriteHeader implements http.ResponseWriter. Informational statuses
// other than 101 are dropped (net/http sends them at once; the frontend
// sends none).
func (w *response) WriteHeader(code int) {
	if w.wroteHeader || code < 100 || code > 999 {
		return
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		return
	}
	w.wroteHeader, w.status = true, code
	if cl := w.hdr.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			w.declared = n
		} else {
			delete(w.hdr, "Content-Length")
		}
	}
	w.noBody = w.req.Method == http.MethodHead || code < 200 || code == http.StatusNoContent || code == http.StatusNotModified
}

// Write implements http.ResponseWriter.
func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.aborted {
		return 0, http.ErrHandlerTimeout
	}
	if w.noBody {
		if w.req.Method == http.MethodHead {
			// counted for the Content-Length, and kept for sniffing
			w.written += int64(len(p))
			if !w.headSent && len(w.pending) < 512 {
				w.pending = append(w.pending, p[:min(len(p), 512-len(w.pending))]...)
			}
			return len(p), nil
		}
		return 0, http.ErrBodyNotAllowed
	}
	if w.declared >= 0 && w.written+int64(len(p)) > w.declared {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if !w.headSent {
		if len(w.pending)+len(p) <= sniffLen {
			w.pending = append(w.pending, p...)
			return len(p), nil
		}
		if err := w.sendHead(false); err != nil {
			return 0, err
		}
	}
	if err := w.writeBody(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeBody puts p (after the pending bytes) into the connection's writer.
func (w *response) writeBody(p []byte) error {
	bw := w.c.bw
	if w.noBody {
		w.pending = w.pending[:0]
		return nil
	}
	if len(w.pending) > 0 {
		q := w.pending
		w.pending = w.pending[:0]
		if err := w.writeBody(q); err != nil {
			return err
		}
	}
	if len(p) == 0 {
		return nil
	}
	if w.chunked {
		_, _ = bw.Write(append(strconv.AppendInt(w.chunkHead[:0], int64(len(p)), 16), '\r', '\n'))
	}
	_, _ = bw.Write(p)
	var err error
	if w.chunked {
		_, err = bw.WriteString("\r\n")
	}
	if err != nil {
		w.aborted = true
	}
	return err
}

// FlushError sends the head and what the handler wrote (the method
// http.ResponseController calls).
func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.aborted {
		return http.ErrHandlerTimeout
	}
	if !w.headSent {
		if err := w.sendHead(false); err != nil {
			return err
		}
	}
	if err := w.writeBody(nil); err != nil {
		return err
	}
	if err := w.c.bw.Flush(); err != nil {
		w.aborted = true
		return err
	}
	return nil
}

// Flush implements http.Flusher.
func (w *response) Flush() { _ = w.FlushError() }

// BufferHead writes the response head (and any body the handler wrote)
// into the connection's buffer without sending it, and returns a copy of
// those bytes, valid until the next request on the connection (none when
// they did not fit in the buffer: then they were sent). A caller
// that sends them itself on the socket (with its first bytes of the body:
// one write instead of two) then calls DropBuffered; one that does not
// leaves them to be sent with the rest of the response.
func (w *response) BufferHead() ([]byte, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.aborted {
		return nil, http.ErrHandlerTimeout
	}
	bw := w.c.bw
	if bw.Buffered() > 0 {
		if err := bw.Flush(); err != nil {
			w.aborted = true
			return nil, err
		}
	}
	// Format into the connection's head buffer through bw, then put the
	// bytes back into bw, so that both hold them.
	w.c.head = w.c.head[:0]
	bw.Reset(&w.c.head)
	var err error
	if !w.headSent {
		err = w.sendHead(false)
	}
	if err == nil {
		err = w.writeBody(nil)
	}
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(w.c.rwc)
	if err != nil {
		w.aborted = true
		return nil, err
	}
	if len(w.c.head) > bw.Available() {
		// Too large to hold: sent now, nothing is left for the caller.
		if _, err := w.c.rwc.Write(w.c.head); err != nil {
			w.aborted = true
			return nil, err
		}
		return nil, nil
	}
	_, _ = bw.Write(w.c.head)
	return w.c.head, nil
}

// DropBuffered discards what the connection's buffer holds: the caller
// has sent it (BufferHead).
func (w *response) DropBuffered() { w.c.bw.Reset(w.c.rwc) }

// byteSink is a growing byte slice that bw can write into.
type byteSink []byte

// Write appends p.
func (b *byteSink) Write(p []byte) (int, error) {
	*b = append(*b, p...)
	return len(p), nil
}

// SetReadDeadline is the connection's (http.ResponseController), applied
// before the connection's next read from the socket (see deadlineReader).
func (w *response) SetReadDeadline(t time.Time) error {
	w.c.rd.SetReadDeadline(t)
	return nil
}

// SetWriteDeadline is the connection's (http.ResponseController).
func (w *response) SetWriteDeadline(t time.Time) error { return w.c.rwc.SetWriteDeadline(t) }

// finish ends the response after the handler returned: the head if not
// sent, the body left, the terminating chunk, in one write.
func (w *response) finish() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.aborted {
		return http.ErrHandlerTimeout
	}
	if !w.headSent {
		if err := w.sendHead(true); err != nil {
			return err
		}
	}
	if err := w.writeBody(nil); err != nil {
		return err
	}
	bw := w.c.bw
	if w.chunked {
		_, _ = bw.WriteString("0\r\n\r\n")
	}
	if err := bw.Flush(); err != nil {
		w.aborted = true
		return err
	}
	if w.declared >= 0 && w.written < w.declared && !w.noBody {
		w.closeAfter = true // the client waits for bytes that never come
	}
	return nil
}

// sendHead decides the body's framing and writes the head into the
// connection's writer; final: the handler has returned, so the length of
// a body that is all pending is known.
func (w *response) sendHead(final bool) error {
	w.headSent = true
	h := w.hdr
	req := w.req
	// The request body the handler left: read it now (up to a limit) so
	// the connection can serve the next request, or close after.
	switch {
	case w.body.err != nil:
		w.closeQuiet = true // as net/http: no Connection field for this one
	case !w.body.discard():
		w.closeAfter = true
	}
	if w.c.srv.shutting.Load() || hasToken(h["Connection"], "close") {
		w.closeAfter = true
	}
	// The head's order is net/http's: the handler's fields sorted, then
	// Date, Content-Length, Content-Type, Connection, Transfer-Encoding
	// where the server adds them.
	var cl, ctype, connection, te string
	if !w.noBody || w.req.Method == http.MethodHead && final && w.written > 0 {
		if _, has := h["Content-Type"]; !has && len(w.pending) > 0 && h.Get("Content-Encoding") == "" {
			ctype = http.DetectContentType(w.pending)
		}
		switch {
		case w.declared >= 0:
		case final && w.req.Method == http.MethodHead:
			cl = strconv.FormatInt(w.written, 10)
		case final:
			cl = strconv.Itoa(len(w.pending))
		case req.ProtoMinor >= 1:
			w.chunked = true
			te = "chunked"
		default:
			w.closeAfter = true // HTTP/1.0: the body ends with the connection
		}
	}
	if w.status == http.StatusNoContent || w.status == http.StatusNotModified || w.status < 200 {
		delete(h, "Content-Length")
		delete(h, "Transfer-Encoding")
	}
	switch {
	case w.closeAfter && (w.c.srv.shutting.Load() || !hasToken(h["Connection"], "close")):
		delete(h, "Connection")
		if req.ProtoMinor >= 1 {
			connection = "close"
		}
	case !w.closeAfter && req.ProtoMinor == 0:
		connection = "keep-alive"
	}
	if te != "" {
		delete(h, "Transfer-Encoding")
	}
	bw := w.c.bw
	if req.ProtoMinor == 0 {
		_, _ = bw.WriteString("HTTP/1.0 ")
	} else {
		_, _ = bw.WriteString("HTTP/1.1 ")
	}
	// The status goes through chunkHead: a local array would escape
	// through bufio.Writer.Write (an allocation per response).
	_, _ = bw.Write(strconv.AppendInt(w.chunkHead[:0], int64(w.status), 10))
	_ = bw.WriteByte(' ')
	if t := http.StatusText(w.status); t != "" {
		_, _ = bw.WriteString(t)
	} else {
		_, _ = bw.WriteString("status code ")
		_, _ = bw.Write(strconv.AppendInt(w.chunkHead[:0], int64(w.status), 10))
	}
	_, _ = bw.WriteString("\r\n")
	w.keys = w.keys[:0]
	for k := range h {
		w.keys = append(w.keys, k)
	}
	slices.Sort(w.keys)
	for _, k := range w.keys {
		for _, v := range h[k] {
			_, _ = bw.WriteString(k)
			_, _ = bw.WriteString(": ")
			_, _ = bw.WriteString(headerValue(v))
			_, _ = bw.WriteString("\r\n")
		}
	}
	if _, has := h["Date"]; !has {
		_, _ = bw.WriteString("Date: ")
		_, _ = bw.Write(w.c.srv.httpDate())
		_, _ = bw.WriteString("\r\n")
	}
	for _, f := range [...]struct{ k, v string }{{"Content-Length", cl}, {"Content-Type", ctype},
		{"Connection", connection}, {"Transfer-Encoding", te}} {
		if f.v != "" {
			_, _ = bw.WriteString(f.k)
			_, _ = bw.WriteString(": ")
			_, _ = bw.WriteString(f.v)
			_, _ = bw.WriteString("\r\n")
		}
	}
	_, err := bw.WriteString("\r\n")
	if err != nil {
		w.aborted = true
	}
	return err
}

// headerValue is v with CR and LF made spaces (as net/http's header
// writer does), so a handler cannot split the head.
func headerValue(v string) string {
	for i := 0; i < len(v); i++ {
		if v[i] == '\r' || v[i] == '\n' {
			b := []byte(v)
			for j := i; j < len(b); j++ {
				if b[j] == '\r' || b[j] == '\n' {
					b[j] = ' '
				}
			}
			return string(b)
		}
	}
	return v
}

// cachedDate is the Date header's value for the current second.
type cachedDate struct {
	sec int64
	val []byte
}

// httpDate returns the Date header's value, formatted once a second.
func (s *Server) httpDate() []byte {
	now := time.Now()
	if d := s.date.Load(); d != nil && d.sec == now.Unix() {
		return d.val
	}
	d := &cachedDate{sec: now.Unix(), val: now.UTC().AppendFormat(make([]byte, 0, 29), http.TimeFormat)}
	s.date.Store(d)
	return d.val
}
