//go:build unix

package zmqtransport

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// libzmqEnv makes the tests' connections use libzmq's DEALER (cPump)
// rather than goPump: TestLibZMQPump runs the package's tests again with it.
const libzmqEnv = "SLUICE_TEST_LIBZMQ"

// testLibZMQ reports whether this run's connections use cPump.
func testLibZMQ() bool { return os.Getenv(libzmqEnv) != "" }

// cfgT is c with this run's pump choice.
func cfgT(c ClientConfig) ClientConfig {
	c.LibZMQ = testLibZMQ()
	return c
}

// TestLibZMQPump runs every other test of the package again with libzmq's
// DEALER on the C pump thread, so that both pumps are checked.
func TestLibZMQPump(t *testing.T) {
	if testLibZMQ() || os.Getenv(helperEngineEnv) != "" {
		t.Skip("inside the libzmq run")
	}
	if testing.Short() {
		t.Skip("short")
	}
	cmd := exec.Command(os.Args[0], "-test.skip", "^(TestLibZMQPump|FuzzZMTPFrames)$", "-test.count=1")
	cmd.Env = append(os.Environ(), libzmqEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tests with libzmq's DEALER: %v\n%s", err, out)
	}
}

// TestGoPumpAddr: ipc:// and tcp://host:port go through goPump; what only
// libzmq understands does not.
func TestGoPumpAddr(t *testing.T) {
	for _, tc := range []struct {
		in, network, addr string
		ok                bool
	}{
		{"ipc:///tmp/x.sock", "unix", "/tmp/x.sock", true},
		{"tcp://127.0.0.1:5555", "tcp", "127.0.0.1:5555", true},
		{"tcp://[::1]:5555", "tcp", "[::1]:5555", true},
		{"tcp://*:5555", "", "", false},
		{"tcp://127.0.0.1:1;127.0.0.2:5555", "", "", false},
		{"inproc://x", "", "", false},
		{"pgm://x", "", "", false},
	} {
		n, a, ok := goPumpAddr(tc.in)
		if n != tc.network || a != tc.addr || ok != tc.ok {
			t.Errorf("goPumpAddr(%q) = %q, %q, %v; want %q, %q, %v", tc.in, n, a, ok, tc.network, tc.addr, tc.ok)
		}
	}
}

// TestZMTPFrameHeader: short frames take one size byte, longer ones eight,
// and readFrame reads back what appendFrameHeader framed.
func TestZMTPFrameHeader(t *testing.T) {
	for _, n := range []int{0, 1, 255, 256, 70000} {
		for _, flags := range []byte{0, zmtpMore, zmtpCommand} {
			body := bytes.Repeat([]byte{'x'}, n)
			b := append(appendFrameHeader(nil, flags, n), body...)
			if want := 2 + n + map[bool]int{true: 7}[n > 255]; len(b) != want {
				t.Fatalf("n=%d: %d bytes framed, want %d", n, len(b), want)
			}
			f, got, err := readFrame(bytes.NewReader(b), nil)
			if err != nil || !bytes.Equal(got, body) || f&^zmtpLong != flags {
				t.Fatalf("n=%d flags=%d: read %d, %d bytes, %v", n, flags, f, len(got), err)
			}
		}
	}
}

// TestZMTPHandshake: the greeting and READY a ROUTER answers are accepted;
// another mechanism, an older ZMTP, an ERROR, a socket other than ROUTER
// and a message before READY are refused.
func TestZMTPHandshake(t *testing.T) {
	greet := func(mech string, major byte) []byte {
		var g [64]byte
		g[0], g[9], g[10], g[11] = 0xFF, 0x7F, major, 0
		copy(g[12:], mech)
		g[32] = 1 // as-server
		return g[:]
	}
	errCmd := func(reason string) []byte {
		body := append([]byte{5, 'E', 'R', 'R', 'O', 'R', byte(len(reason))}, reason...)
		return append(appendFrameHeader(nil, zmtpCommand, len(body)), body...)
	}
	for _, tc := range []struct {
		name, want string
		peer       []byte
	}{
		{"router", "", append(greet("NULL", 3), appendReady(nil, "ROUTER", "")...)},
		{"curve", "mechanism", append(greet("CURVE", 3), appendReady(nil, "ROUTER", "")...)},
		{"zmtp2", "before 3.0", append(greet("NULL", 1), appendReady(nil, "ROUTER", "")...)},
		{"dealer", "want ROUTER", append(greet("NULL", 3), appendReady(nil, "DEALER", "")...)},
		{"error", "refused", append(greet("NULL", 3), errCmd("no")...)},
		{"message", "before READY", append(greet("NULL", 3), 0, 1, 'x')},
		{"short", "EOF", greet("NULL", 3)[:30]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rw := &fakeConn{r: bytes.NewReader(tc.peer)}
			err := handshake(rw, "fe-1")
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("handshake: %v; want %q", err, tc.want)
			}
			// What we sent: a 3.0 NULL client greeting and READY as a DEALER
			// named fe-1.
			sent := rw.w.Bytes()
			if len(sent) < 64 || sent[0] != 0xFF || sent[9] != 0x7F || sent[10] != 3 || string(sent[12:16]) != "NULL" || sent[32] != 0 {
				t.Fatalf("greeting % x", sent[:min(len(sent), 64)])
			}
			f, body, err := readFrame(bytes.NewReader(sent[64:]), nil)
			if err != nil || f != zmtpCommand {
				t.Fatalf("READY frame: %d, %v", f, err)
			}
			name, props, _ := command(body)
			st, _ := property(props, "Socket-Type")
			id, _ := property(props, "Identity")
			if name != "READY" || st != "DEALER" || id != "fe-1" {
				t.Fatalf("sent %s Socket-Type %q Identity %q", name, st, id)
			}
		})
	}
}

// fakeConn reads r and records what is written.
type fakeConn struct {
	r io.Reader
	w bytes.Buffer
}

func (f *fakeConn) Read(p []byte) (int, error)  { return f.r.Read(p) }
func (f *fakeConn) Write(p []byte) (int, error) { return f.w.Write(p) }

// TestGoPumpFrames: a fake ROUTER over a Unix socket sends messages of
// every size class (split across writes at every awkward place), a PING
// command (answered with PONG carrying its context) and other commands
// (skipped); goPump hands over exactly the messages, then a disconnect
// when the ROUTER closes, and reconnects.
func TestGoPumpFrames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p, err := newGoPump("ipc://"+path, "fe-frames", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	sizes := []int{0, 1, 200, 255, 256, 5000, 70000, 200000}
	accept := func() net.Conn {
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		var g [64]byte
		if _, err := io.ReadFull(c, g[:]); err != nil {
			t.Fatal(err)
		}
		if _, _, err := readFrame(c, nil); err != nil { // its READY
			t.Fatal(err)
		}
		g[32] = 1
		if _, err := c.Write(append(g[:], appendReady(nil, "ROUTER", "")...)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := accept()
	var stream []byte
	for i, n := range sizes {
		if i == 2 {
			ping := []byte{4, 'P', 'I', 'N', 'G', 0, 10, 'c', 't', 'x'}
			stream = append(append(stream, appendFrameHeader(nil, zmtpCommand, len(ping))...), ping...)
			other := []byte{9, 'S', 'U', 'B', 'S', 'C', 'R', 'I', 'B', 'E'}
			stream = append(append(stream, appendFrameHeader(nil, zmtpCommand, len(other))...), other...)
		}
		stream = append(stream, appendFrameHeader(nil, 0, n)...)
		stream = append(stream, bytes.Repeat([]byte{byte(i + 1)}, n)...)
	}
	go func() {
		for off, step := 0, 1; off < len(stream); step = step*3 + 1 {
			end := min(off+step, len(stream))
			if _, err := c.Write(stream[off:end]); err != nil {
				return
			}
			off = end
			time.Sleep(time.Millisecond)
		}
	}()
	// The PONG comes back with the PING's context.
	f, pong, err := readFrame(c, nil)
	if err != nil || f != zmtpCommand || string(pong) != "\x04PONGctx" {
		t.Fatalf("answer to PING: %d %q %v", f, pong, err)
	}
	deadline := time.After(10 * time.Second)
	for i := 0; i < len(sizes); {
		ev, view, ok := p.next()
		if !ok {
			select {
			case <-p.wake():
			case <-deadline:
				t.Fatalf("%d of %d messages", i, len(sizes))
			}
			continue
		}
		if ev.kind != pumpFrame || len(view) != sizes[i] || len(view) > 0 && (view[0] != byte(i+1) || view[len(view)-1] != byte(i+1)) {
			t.Fatalf("message %d: kind %d, %d bytes; want %d", i, ev.kind, len(view), sizes[i])
		}
		p.release()
		i++
	}
	// A send reaches the peer as one message frame.
	if err := p.send([]byte("hello"), true); err != nil {
		t.Fatal(err)
	}
	if f, got, err := readFrame(c, nil); err != nil || f != 0 || string(got) != "hello" {
		t.Fatalf("sent frame: %d %q %v", f, got, err)
	}
	c.Close()
	for {
		ev, _, ok := p.next()
		if ok {
			p.release()
			if ev.kind != pumpDisconnected {
				t.Fatalf("event %d after the close, want a disconnect", ev.kind)
			}
			break
		}
		select {
		case <-p.wake():
		case <-deadline:
			t.Fatal("no disconnect")
		}
	}
	// Unconnected, a send with report fails with EAGAIN, as ZMQ_IMMEDIATE does.
	_ = ln.Close()
	if err := p.send([]byte("lost"), true); err != nil {
		t.Fatal(err)
	}
	ev, _, ok := p.next()
	if !ok || ev.kind != pumpSendFailed || !errors.Is(ev.err, syscall.EAGAIN) {
		t.Fatalf("send while unconnected: %v %+v", ok, ev)
	}
	p.release()
}

// FuzzZMTPFrames: whatever bytes a peer sends, readFrame and the raw
// reader agree on the frames (or both fail), and neither panics.
func FuzzZMTPFrames(f *testing.F) {
	f.Add(append(appendFrameHeader(nil, 0, 3), "abc"...))
	f.Add(append(appendFrameHeader(nil, zmtpMore, 300), bytes.Repeat([]byte{1}, 300)...))
	f.Add([]byte{zmtpLong, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add(appendReady(nil, "ROUTER", "x"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var want [][]byte
		r := bytes.NewReader(data)
		for {
			_, body, err := readFrame(r, nil)
			if err != nil {
				break
			}
			want = append(want, body)
		}
		_, props, ok := command(data)
		if ok {
			_, _ = property(props, "Socket-Type")
		}
		a, b := net.Pipe()
		defer a.Close()
		go func() {
			_, _ = b.Write(data)
			b.Close()
		}()
		var got [][]byte
		rd := rawReader{src: a.Read, buf: make([]byte, 64)}
		for {
			_, n, err := rd.header()
			if err != nil || n > uint64(len(data)) {
				break
			}
			body := make([]byte, n)
			if err := rd.full(body); err != nil {
				break
			}
			got = append(got, body)
		}
		if len(got) != len(want) {
			t.Fatalf("%d frames through the buffered reader, %d through readFrame", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("frame %d differs", i)
			}
		}
	})
}

// fakeRouter listens on a Unix socket and answers goPump's handshake as a
// ROUTER; accept returns the server side of the next connection.
type fakeRouter struct {
	t  *testing.T
	ln net.Listener
}

func newFakeRouter(t *testing.T) (*fakeRouter, string) {
	path := filepath.Join(t.TempDir(), "e.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &fakeRouter{t: t, ln: ln}, "ipc://" + path
}

func (f *fakeRouter) accept() net.Conn {
	c, err := f.ln.Accept()
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	var g [64]byte
	if _, err := io.ReadFull(c, g[:]); err != nil {
		f.t.Fatal(err)
	}
	if _, _, err := readFrame(c, nil); err != nil {
		f.t.Fatal(err)
	}
	g[32] = 1
	if _, err := c.Write(append(g[:], appendReady(nil, "ROUTER", "")...)); err != nil {
		f.t.Fatal(err)
	}
	return c
}

// waitEvent waits up to d for the pump's next event of a kind other than
// skip (and not a frame).
func waitEvent(t *testing.T, p *goPump, skip int, d time.Duration) pumpEvent {
	t.Helper()
	deadline := time.After(d)
	for {
		ev, _, ok := p.next()
		if ok {
			p.release()
			if ev.kind != pumpFrame && ev.kind != skip {
				return ev
			}
			continue
		}
		select {
		case <-p.wake():
		case <-deadline:
			t.Fatalf("no event within %s", d)
		}
	}
}

// TestGoPumpStalledEngine: an engine that stops reading fills the socket;
// the send that waits longer than the stall time drops the connection (a
// failed send, then a disconnect) instead of blocking its caller for ever,
// and the pump connects again.
func TestGoPumpStalledEngine(t *testing.T) {
	f, addr := newFakeRouter(t)
	p, err := newGoPump(addr, "fe-stall", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	f.accept() // and never read
	frame := make([]byte, 32<<10)
	start := time.Now()
	var ev pumpEvent
	disconnected := false // the reader may report the drop before the failed send is queued
	// (EAGAIN: not connected yet, or after the drop.)
	for ev.kind != pumpSendFailed || errors.Is(ev.err, syscall.EAGAIN) {
		if time.Since(start) > 20*time.Second {
			t.Fatal("sends to a stalled engine never failed")
		}
		if err := p.send(frame, true); err != nil {
			t.Fatal(err)
		}
		if it, _, ok := p.next(); ok {
			ev = it
			disconnected = disconnected || it.kind == pumpDisconnected
			p.release()
		}
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(ev.err, os.ErrDeadlineExceeded) {
		t.Fatalf("failed send: %v, want a deadline", ev.err)
	}
	if !disconnected {
		if ev := waitEvent(t, p, pumpSendFailed, 5*time.Second); ev.kind != pumpDisconnected {
			t.Fatalf("event %d, want a disconnect", ev.kind)
		}
	}
	f.accept() // it reconnects
}

// TestGoPumpCloseWhileWriting: close does not wait for a sender blocked on
// a full socket; the sender returns.
func TestGoPumpCloseWhileWriting(t *testing.T) {
	f, addr := newFakeRouter(t)
	p, err := newGoPump(addr, "fe-close", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f.accept()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		frame := make([]byte, 32<<10)
		for p.send(frame, false) == nil {
		}
	}()
	time.Sleep(300 * time.Millisecond) // the socket is full by now
	closed := make(chan struct{})
	go func() { p.close(); close(closed) }()
	for _, ch := range []chan struct{}{closed, sent} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("close or the blocked send did not return")
		}
	}
}
