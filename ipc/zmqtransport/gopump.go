//go:build unix

package zmqtransport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// pump is what an EngineConn's I/O goroutine needs of its socket pump:
// cPump (libzmq on a C thread) or goPump (ZMTP spoken in Go).
type pump interface {
	// next returns the next received frame (kind pumpFrame; view valid
	// until release) or event; ok is false when there is none. The caller
	// releases every item next returned before the next call.
	next() (ev pumpEvent, view []byte, ok bool)
	// release gives the item next returned back.
	release()
	// send queues frame for the engine (copied or written before it
	// returns); with report, a send that fails comes back as a
	// pumpSendFailed event.
	send(frame []byte, report bool) error
	// wake is signalled after items were added.
	wake() <-chan struct{}
	// close stops the pump; the I/O goroutine calls it last.
	close()
}

// wake returns the channel that the pipe waiter signals.
func (c *cPump) wake() <-chan struct{} { return c.w.C }

// goPump is an EngineConn's socket pump without libzmq: it speaks ZMTP 3.0
// (the NULL mechanism, as a DEALER) to the engine's ROUTER over the ipc
// (Unix) or tcp connection itself. A reader goroutine connects, greets,
// reads each message into a buffer of its own and hands it to the I/O
// goroutine through a channel; senders write their frames to the socket
// under a mutex. So a step's batch reaches the I/O goroutine through Go's
// network poller and one goroutine hand-off, instead of libzmq's I/O thread,
// the C pump thread and its notify pipe (two C threads woken per step). It
// behaves as the cPump's DEALER does: reconnect every 100 ms (backing off
// to 1 s) while the engine is away, nothing queued while unconnected
// (ZMQ_IMMEDIATE: a send then fails), and a pumpDisconnected event when an
// established connection drops. One difference: libzmq queues what a
// stopped engine does not read without bound (ZMQ_SNDHWM 0); goPump's
// senders wait for room in the socket, and a write that waits longer than
// the liveness timeout drops the connection (the engine counts as gone).
// CURVE and other transports stay on cPump.
//
// Reads and writes are raw system calls through the connection's
// syscall.RawConn (no entersyscall: see cPump on sysmon).
type goPump struct {
	network, address string
	identity         string

	in     chan goItem   // reader → I/O goroutine
	wakeC  chan struct{} // capacity 1
	cur    goItem        // what next returned, until release (the I/O goroutine's)
	free   chan []byte   // message buffers given back, for reuse
	stop   chan struct{} // closed by close
	done   chan struct{} // closed when the reader returns
	cancel context.CancelFunc
	ctx    context.Context

	// wmu orders the writers (a frame is written whole); it is taken
	// before mu, and close does not wait for it.
	wmu   sync.Mutex
	wbuf  []byte        // a frame's header and body, written at once (wmu)
	wr    rawWrite      // writeAll's state (wmu)
	stall time.Duration // how long a write may wait for room before the connection is dropped

	mu     sync.Mutex // guards conn, rc, closed
	conn   net.Conn   // nil while unconnected
	rc     syscall.RawConn
	closed bool
}

// goItem is one message or event from the reader.
type goItem struct {
	ev  pumpEvent
	buf []byte
}

// ZMTP 3.0 framing (rfc.zeromq.org/spec/23).
const (
	zmtpMore    = 0x01
	zmtpLong    = 0x02
	zmtpCommand = 0x04
	// zmtpMaxFrame bounds a frame's size: more is a broken stream.
	zmtpMaxFrame = 1 << 31
	// zmtpMaxCommand bounds a handshake command's size.
	zmtpMaxCommand = 1 << 20
)

// goPumpAddr returns the network and address of a ZMQ endpoint goPump can
// connect to (ipc:// and tcp://), or ok false.
func goPumpAddr(endpoint string) (network, address string, ok bool) {
	switch {
	case strings.HasPrefix(endpoint, "ipc://"):
		return "unix", strings.TrimPrefix(endpoint, "ipc://"), true
	case strings.HasPrefix(endpoint, "tcp://"):
		a := strings.TrimPrefix(endpoint, "tcp://")
		if strings.Contains(a, ";") || strings.HasPrefix(a, "*") {
			return "", "", false // a source address or a wildcard: libzmq's syntax
		}
		return "tcp", a, true
	}
	return "", "", false
}

// newGoPump starts connecting to endpoint as the DEALER identity. A write
// that finds no room in the socket for stall (an engine that stopped
// reading) drops the connection, as the engine's death would.
func newGoPump(endpoint, identity string, stall time.Duration) (*goPump, error) {
	network, address, ok := goPumpAddr(endpoint)
	if !ok {
		return nil, fmt.Errorf("zmqtransport: endpoint %q needs libzmq", endpoint)
	}
	if len(identity) == 0 || len(identity) > 255 {
		return nil, fmt.Errorf("zmqtransport: identity of %d bytes (1–255)", len(identity))
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &goPump{network: network, address: address, identity: identity,
		in: make(chan goItem, 1024), wakeC: make(chan struct{}, 1), free: make(chan []byte, 8), stall: stall,
		stop: make(chan struct{}), done: make(chan struct{}), ctx: ctx, cancel: cancel}
	go p.run()
	return p, nil
}

// wake is signalled after the reader handed something over.
func (p *goPump) wake() <-chan struct{} { return p.wakeC }

// next returns the next message or event the reader handed over.
func (p *goPump) next() (pumpEvent, []byte, bool) {
	select {
	case it := <-p.in:
		p.cur = it
		return it.ev, it.buf, true
	default:
		return pumpEvent{}, nil, false
	}
}

// release gives the current message's buffer back for reuse.
func (p *goPump) release() {
	if b := p.cur.buf; b != nil {
		select {
		case p.free <- b[:0]:
		default:
		}
	}
	p.cur = goItem{}
}

// push hands it to the I/O goroutine (waiting while the channel is full:
// the engine's frames then wait in the socket) and wakes it; false once
// the pump is closing.
func (p *goPump) push(it goItem) bool {
	select {
	case p.in <- it:
	case <-p.stop:
		return false
	}
	select {
	case p.wakeC <- struct{}{}:
	default: // a wake-up is already pending
	}
	return true
}

// send writes frame to the engine as one ZMTP message. Unconnected, it
// sends nothing (a failed send, reported if asked); a write error drops
// the connection (the reader reconnects).
func (p *goPump) send(frame []byte, report bool) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.wbuf = appendFrameHeader(p.wbuf[:0], 0, len(frame))
	if len(frame) <= 64<<10 {
		p.wbuf = append(p.wbuf, frame...)
		frame = nil
	}
	return p.write(report, p.wbuf, frame)
}

// write writes a and then b to the connection; wmu is held.
func (p *goPump) write(report bool, a, b []byte) error {
	p.mu.Lock()
	conn, rc, closed := p.conn, p.rc, p.closed
	p.mu.Unlock()
	if closed {
		return errPumpClosed
	}
	if conn == nil {
		if report {
			p.offer(goItem{ev: pumpEvent{kind: pumpSendFailed, err: syscall.EAGAIN}})
		}
		return nil
	}
	err := p.writeAll(conn, rc, a)
	if err == nil && len(b) > 0 {
		err = p.writeAll(conn, rc, b)
	}
	if err != nil {
		// A half-written frame breaks the stream: drop the connection; the
		// reader sees it closed, reports the disconnect and reconnects.
		p.mu.Lock()
		if p.conn == conn {
			_ = conn.Close()
			p.conn, p.rc = nil, nil
		}
		p.mu.Unlock()
		if report {
			p.offer(goItem{ev: pumpEvent{kind: pumpSendFailed, err: err}})
		}
	}
	return nil
}

// offer hands it to the I/O goroutine if there is room (as the C pump
// reports a failed send only while a slot is free).
func (p *goPump) offer(it goItem) {
	select {
	case p.in <- it:
		select {
		case p.wakeC <- struct{}{}:
		default:
		}
	default:
	}
}

// writeAll writes b to the connection with raw write(2)s, waiting in the
// network poller while the socket is full, at most stall. wmu is held: the
// write's state lives in p.wr, and its callback is made once (a closure
// per call would be two allocations per frame).
func (p *goPump) writeAll(conn net.Conn, rc syscall.RawConn, b []byte) error {
	w := &p.wr
	w.conn, w.b, w.armed, w.err, w.stall = conn, b, false, nil, p.stall
	if w.fn == nil {
		w.fn = w.write
	}
	err := rc.Write(w.fn)
	if w.armed {
		_ = conn.SetWriteDeadline(time.Time{})
	}
	werr := w.err
	w.conn, w.b, w.err = nil, nil, nil
	if err != nil {
		return err
	}
	return werr
}

// rawWrite is writeAll's state, kept in the pump (under wmu).
type rawWrite struct {
	conn  net.Conn
	b     []byte // what is left to write
	armed bool   // the write deadline is set
	err   error  // the write's error
	stall time.Duration
	fn    func(fd uintptr) bool // write, made once
}

// write is the syscall.RawConn.Write callback: it writes w.b, and returns
// false to wait until the socket is writable.
func (w *rawWrite) write(fd uintptr) bool {
	for len(w.b) > 0 {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&w.b[0])), uintptr(len(w.b)))
		switch {
		case e == syscall.EINTR:
			continue
		case e == syscall.EAGAIN:
			if !w.armed {
				w.armed = true
				_ = w.conn.SetWriteDeadline(time.Now().Add(w.stall))
			}
			return false // wait until writable
		case e != 0:
			w.err = e
			return true
		}
		w.b = w.b[n:]
	}
	return true
}

// appendFrameHeader appends a ZMTP frame header (flags, and the size in one
// or eight bytes).
func appendFrameHeader(b []byte, flags byte, n int) []byte {
	if n <= 255 {
		return append(b, flags, byte(n))
	}
	return binary.BigEndian.AppendUint64(append(b, flags|zmtpLong), uint64(n))
}

// close stops the reader, closes the connection and waits for the reader.
func (p *goPump) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.stop)
	p.cancel()
	if p.conn != nil {
		_ = p.conn.Close()
		p.conn, p.rc = nil, nil
	}
	p.mu.Unlock()
	<-p.done
}

// run connects (again) until the pump closes, reading each connection's
// messages until it drops.
func (p *goPump) run() {
	defer close(p.done)
	backoff := 100 * time.Millisecond
	for {
		conn, err := p.connect()
		if err != nil {
			select {
			case <-p.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		rc, err := conn.(syscall.Conn).SyscallConn()
		if err != nil {
			_ = conn.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = conn.Close()
			return
		}
		p.conn, p.rc = conn, rc
		p.mu.Unlock()
		p.readLoop(rc)
		p.mu.Lock()
		if p.conn == conn {
			p.conn, p.rc = nil, nil
		}
		closed := p.closed
		p.mu.Unlock()
		_ = conn.Close()
		if closed || !p.push(goItem{ev: pumpEvent{kind: pumpDisconnected}}) {
			return
		}
	}
}

// connect dials the engine and does the ZMTP greeting and NULL handshake
// (each side's READY), within a second.
func (p *goPump) connect() (net.Conn, error) {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(p.ctx, p.network, p.address)
	if err != nil {
		return nil, fmt.Errorf("dial engine: %w", err)
	}
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if err := handshake(conn, p.identity); err != nil {
		_ = conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, nil
}

// handshake greets the peer as a ZMTP 3.0 NULL client, sends READY
// (Socket-Type DEALER, Identity) and reads the peer's greeting and READY.
func handshake(rw io.ReadWriter, identity string) error {
	var g [64]byte
	g[0], g[9], g[10], g[11] = 0xFF, 0x7F, 3, 0
	copy(g[12:], "NULL")
	ready := appendReady(nil, "DEALER", identity)
	if _, err := rw.Write(append(g[:], ready...)); err != nil {
		return fmt.Errorf("zmtp greeting: %w", err)
	}
	var peer [64]byte
	if _, err := io.ReadFull(rw, peer[:]); err != nil {
		return fmt.Errorf("zmtp greeting: %w", err)
	}
	if peer[0] != 0xFF || peer[9]&1 == 0 || peer[10] < 3 {
		return fmt.Errorf("zmtp greeting: peer speaks ZMTP before 3.0")
	}
	if mech := strings.TrimRight(string(peer[12:32]), "\x00"); mech != "NULL" {
		return fmt.Errorf("zmtp greeting: peer wants mechanism %q", mech)
	}
	flags, body, err := readFrame(rw, nil)
	if err != nil {
		return fmt.Errorf("zmtp handshake: %w", err)
	}
	if flags&zmtpCommand == 0 {
		return fmt.Errorf("zmtp handshake: a message before READY")
	}
	name, props, ok := command(body)
	if !ok {
		return fmt.Errorf("zmtp handshake: malformed command")
	}
	switch name {
	case "READY":
	case "ERROR":
		reason := ""
		if len(props) > 0 && int(props[0]) < len(props) {
			reason = string(props[1 : 1+int(props[0])])
		}
		return fmt.Errorf("zmtp handshake: peer refused: %q", reason)
	default:
		return fmt.Errorf("zmtp handshake: %q before READY", name)
	}
	st, ok := property(props, "Socket-Type")
	if !ok || st != "ROUTER" {
		return fmt.Errorf("zmtp handshake: peer is a %q socket, want ROUTER", st)
	}
	return nil
}

// appendReady appends a READY command with the socket type and identity.
func appendReady(b []byte, socketType, identity string) []byte {
	var body []byte
	body = append(body, 5)
	body = append(body, "READY"...)
	prop := func(name, value string) {
		body = append(body, byte(len(name)))
		body = append(body, name...)
		body = binary.BigEndian.AppendUint32(body, uint32(len(value)))
		body = append(body, value...)
	}
	prop("Socket-Type", socketType)
	prop("Identity", identity)
	b = appendFrameHeader(b, zmtpCommand, len(body))
	return append(b, body...)
}

// command splits a command frame's body into its name and properties.
func command(body []byte) (name string, rest []byte, ok bool) {
	if len(body) < 1 || int(body[0])+1 > len(body) {
		return "", nil, false
	}
	return string(body[1 : 1+int(body[0])]), body[1+int(body[0]):], true
}

// property finds a metadata property's value in a READY command's body.
func property(props []byte, name string) (string, bool) {
	for len(props) > 0 {
		n := int(props[0])
		if 1+n+4 > len(props) {
			return "", false
		}
		key := string(props[1 : 1+n])
		vn := int(binary.BigEndian.Uint32(props[1+n:]))
		if vn > len(props)-(1+n+4) {
			return "", false
		}
		val := string(props[1+n+4 : 1+n+4+vn])
		if strings.EqualFold(key, name) {
			return val, true
		}
		props = props[1+n+4+vn:]
	}
	return "", false
}

// readFrame reads one frame (at most zmtpMaxCommand bytes: the handshake's)
// from r into buf (grown as needed).
func readFrame(r io.Reader, buf []byte) (flags byte, body []byte, err error) {
	var h [9]byte
	if _, err := io.ReadFull(r, h[:2]); err != nil {
		return 0, nil, err
	}
	flags = h[0]
	n := uint64(h[1])
	if flags&zmtpLong != 0 {
		if _, err := io.ReadFull(r, h[2:9]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(h[1:9])
	}
	if n > zmtpMaxCommand {
		return 0, nil, fmt.Errorf("zmtp: a %d-byte frame in the handshake", n)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, err
	}
	return flags, buf, nil
}

// errFrame is a broken ZMTP stream.
var errFrame = errors.New("zmtp: malformed frame")

// readLoop reads the connection's frames until it fails or the pump
// closes: each message frame goes to the I/O goroutine in a buffer of its
// own; a PING command is answered with PONG, other commands are ignored.
func (p *goPump) readLoop(rc syscall.RawConn) {
	rd := rawReader{src: rawRead(rc), buf: make([]byte, 64<<10)}
	for {
		flags, n, err := rd.header()
		if err != nil {
			return
		}
		var body []byte
		select {
		case body = <-p.free:
		default:
		}
		if uint64(cap(body)) < n {
			body = make([]byte, n, max(n, 4<<10))
		}
		body = body[:n]
		if err := rd.full(body); err != nil {
			return
		}
		if flags&zmtpCommand != 0 {
			if name, rest, ok := command(body); ok && name == "PING" && len(rest) >= 2 {
				p.pong(rest[2:])
			}
			continue
		}
		if !p.push(goItem{ev: pumpEvent{kind: pumpFrame}, buf: body}) {
			return
		}
	}
}

// pong answers a ZMTP PING with its context.
func (p *goPump) pong(ctx []byte) {
	body := append([]byte{4, 'P', 'O', 'N', 'G'}, ctx...)
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.wbuf = append(appendFrameHeader(p.wbuf[:0], zmtpCommand, len(body)), body...)
	_ = p.write(false, p.wbuf, nil)
}

// rawReader reads frames through a buffer from src.
type rawReader struct {
	src  func([]byte) (int, error) // at least one byte, or an error
	buf  []byte
	r, w int
}

// rawRead returns a reader of rc with raw read(2)s, waiting in the network
// poller while nothing is there.
func rawRead(rc syscall.RawConn) func([]byte) (int, error) {
	return func(b []byte) (int, error) {
		var got int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			for {
				n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
				switch {
				case e == syscall.EINTR:
					continue
				case e == syscall.EAGAIN:
					return false
				case e != 0:
					rerr = e
				case n == 0:
					rerr = io.EOF
				default:
					got = int(n)
				}
				return true
			}
		})
		if err != nil {
			return 0, err
		}
		return got, rerr
	}
}

// fill reads what the source has (at least one byte) after the buffered
// bytes, moving those to the front first.
func (rd *rawReader) fill() error {
	if rd.r > 0 {
		rd.w = copy(rd.buf, rd.buf[rd.r:rd.w])
		rd.r = 0
	}
	n, err := rd.src(rd.buf[rd.w:])
	rd.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// header reads a frame header: its flags and size.
func (rd *rawReader) header() (byte, uint64, error) {
	for rd.w-rd.r < 2 {
		if err := rd.fill(); err != nil {
			return 0, 0, err
		}
	}
	flags := rd.buf[rd.r]
	if flags&zmtpLong == 0 {
		n := uint64(rd.buf[rd.r+1])
		rd.r += 2
		return flags, n, nil
	}
	for rd.w-rd.r < 9 {
		if err := rd.fill(); err != nil {
			return 0, 0, err
		}
	}
	n := binary.BigEndian.Uint64(rd.buf[rd.r+1:])
	rd.r += 9
	if n > zmtpMaxFrame {
		return 0, 0, errFrame
	}
	return flags, n, nil
}

// full fills b from the buffer and then the socket.
func (rd *rawReader) full(b []byte) error {
	for {
		k := copy(b, rd.buf[rd.r:rd.w])
		rd.r += k
		b = b[k:]
		if len(b) == 0 {
			return nil
		}
		if err := rd.fill(); err != nil {
			return err
		}
	}
}
