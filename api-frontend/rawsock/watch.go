package rawsock

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Watching for the peer's close, per connection instead of per request.
//
// net/http learns that an HTTP/1.x client went away during a request from
// a background read: once the request's body is read it starts a
// goroutine that reads one byte from the connection (blocking in the
// runtime's poller), and when the handler returns it aborts that read
// (a read deadline in the past) and waits on a condition variable for the
// goroutine to finish. That is a goroutine started, a read that finds
// nothing, two parks and two wake-ups (each readying a goroutine may wake
// an idle thread), and three deadline changes per request, for an event
// (the client closing) that almost never happens.
//
// A watched Conn does the same job once per connection: at Accept its
// socket joins the listener's epoll set for EPOLLRDHUP (edge-triggered;
// EPOLLHUP and EPOLLERR come with it), and one goroutine per listener
// waits on that set in the runtime's poller. When a peer closes (or
// resets) its connection, the goroutine cancels the connection's context
// (WatchContext, made by the server's ConnContext hook), which every
// request context on the connection derives from: the request context is
// cancelled as net/http's background read would have cancelled it. Once
// the connection's context is made, net/http's one-byte background read
// does not wait (see Conn.Read).
//
// What stays as net/http has it: a client that half-closes (shutdown of
// its sending side) after its request counts as gone, as net/http's
// read of EOF does; a pipelined request already in the socket when the
// peer closes is not a close (net/http's background read would have read
// its first byte and not cancelled), so the watcher cancels only when the
// socket has nothing unread (a one-byte MSG_PEEK finds EOF or an error).

// watcher is a listener's epoll set of watched connections and the
// goroutine that waits on it.
type watcher struct {
	ep int      // the epoll descriptor (owned by f)
	f  *os.File // ep in the runtime's poller: readable when an event is ready
	rc syscall.RawConn

	mu      sync.Mutex
	conns   map[uint64]*Conn // by the id in their epoll events
	next    uint64           // the next connection's id
	started bool             // the goroutine runs
	closed  bool             // close was called
}

// newWatcher returns a watcher, or nil when the system has no epoll to
// give (the connections are then not watched: net/http's background read
// does the job).
func newWatcher() *watcher {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil
	}
	if err := syscall.SetNonblock(ep, true); err != nil {
		syscall.Close(ep)
		return nil
	}
	f := os.NewFile(uintptr(ep), "rawsock-epoll")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil
	}
	return &watcher{ep: ep, f: f, rc: rc, conns: map[uint64]*Conn{}}
}

// add registers c (its descriptor fd) for the peer's close; false when
// the watcher is closed or the registration fails (c is then unwatched).
func (w *watcher) add(c *Conn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.next++
	id := w.next
	ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | -syscall.EPOLLET}
	setEventID(&ev, id)
	if syscall.EpollCtl(w.ep, syscall.EPOLL_CTL_ADD, c.fd, &ev) != nil {
		return false
	}
	w.conns[id] = c
	c.id = id
	if !w.started {
		w.started = true
		go w.run()
	}
	return true
}

// remove unregisters c; Conn.Close calls it before closing the socket, so
// the descriptor cannot be reused by another connection while it is
// still in the set.
func (w *watcher) remove(c *Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.conns[c.id]; !ok {
		return
	}
	delete(w.conns, c.id)
	if !w.closed {
		_ = syscall.EpollCtl(w.ep, syscall.EPOLL_CTL_DEL, c.fd, nil)
	}
}

// close stops the goroutine and releases the epoll set; the connections
// still open stay as they are, no longer watched.
func (w *watcher) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.mu.Unlock()
	_ = w.f.Close() // wakes run's wait with an error
}

// run waits for events and reports each watched peer's close.
func (w *watcher) run() {
	var evs [32]syscall.EpollEvent
	var n int
	wait := func(fd uintptr) bool {
		for {
			k, err := syscall.EpollWait(int(fd), evs[:], 0)
			if err == syscall.EINTR {
				continue
			}
			n = max(k, 0)
			return n > 0 || err != nil
		}
	}
	for {
		if err := w.rc.Read(wait); err != nil {
			return // closed
		}
		for i := range n {
			w.peerClosed(eventID(&evs[i]))
		}
	}
}

// peerClosed marks the connection with id gone and cancels its context,
// unless what the peer sent before closing is still unread (a pipelined
// request: net/http reads it and learns of the close then).
func (w *watcher) peerClosed(id uint64) {
	w.mu.Lock()
	c, ok := w.conns[id]
	if ok {
		// Under mu: Close waits in remove, so fd is still this socket.
		var b [1]byte
		n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(c.fd), uintptr(unsafe.Pointer(&b[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		if e == 0 && n > 0 {
			ok = false // data first
		}
	}
	w.mu.Unlock()
	if ok {
		c.setGone()
	}
}

// setEventID and eventID keep a 64-bit id in an epoll event's data.
func setEventID(ev *syscall.EpollEvent, id uint64) {
	ev.Fd, ev.Pad = int32(uint32(id)), int32(uint32(id>>32))
}

func eventID(ev *syscall.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}

// peerWatch is a watched Conn's state.
type peerWatch struct {
	w  *watcher // nil: not watched
	id uint64   // its id in w
	fd int      // the socket

	mu     sync.Mutex
	gone   bool               // the peer closed
	cancel context.CancelFunc // the connection's context (WatchContext)
	// armed: the connection has a context that the peer's close cancels,
	// so net/http's background read need not wait (Read).
	armed atomic.Bool
}

// setGone records the peer's close and cancels the connection's context.
func (p *peerWatch) setGone() {
	p.mu.Lock()
	p.gone = true
	cancel := p.cancel
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// WatchContext returns a context derived from ctx that is cancelled when
// the peer closes (or resets) the connection, for an http.Server's
// ConnContext hook: every request context on the connection derives from
// it, so a request sees its client go away as net/http's per-request
// background read would show it. From then on net/http's background read
// returns at once (Conn.Read). Without a watcher (a Conn from a listener
// that could not make one) it returns ctx. Call it once per connection.
func (c *Conn) WatchContext(ctx context.Context) context.Context {
	if c.w == nil {
		return ctx
	}
	ctx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	c.cancel = cancel
	gone := c.gone
	c.mu.Unlock()
	if gone {
		cancel()
	}
	c.armed.Store(true)
	return ctx
}

// WatchContext is Conn.WatchContext for any connection, for an
// http.Server's ConnContext hook: ctx itself for a connection that is not
// a watched Conn.
func WatchContext(ctx context.Context, c net.Conn) context.Context {
	if rc, ok := c.(*Conn); ok {
		return rc.WatchContext(ctx)
	}
	return ctx
}
