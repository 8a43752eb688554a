package httpserve

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// watcher is a server's epoll set of connections watched for their peer's
// close, and the goroutine that waits on it in the runtime's poller.
// A socket is registered once, at accept, for EPOLLRDHUP (edge-triggered;
// EPOLLHUP and EPOLLERR come with it): requests arriving on it make no
// event. It is never unregistered: closing a socket takes it out of the
// set, and events carry an id, not the descriptor, so a descriptor reused
// by a later connection cannot be mistaken for the old one.
type watcher struct {
	f  *os.File // the epoll descriptor, readable when an event is ready
	ep int
	rc syscall.RawConn

	mu    sync.Mutex
	peers map[uint64]*peer
	next  uint64
}

// peer is one watched connection: the cancel function of its request in
// flight and whether its peer has gone.
type peer struct {
	id     uint64
	fd     int
	mu     sync.Mutex
	gone   bool
	cancel context.CancelFunc
}

// set stores the request in flight's cancel function (nil between
// requests), cancelling at once when the peer has already gone.
func (p *peer) set(cancel context.CancelFunc) {
	p.mu.Lock()
	p.cancel = cancel
	gone := p.gone
	p.mu.Unlock()
	if gone && cancel != nil {
		cancel()
	}
}

// newWatcher makes the epoll set and starts its goroutine.
func newWatcher() (*watcher, error) {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	if err := syscall.SetNonblock(ep, true); err != nil {
		_ = syscall.Close(ep)
		return nil, fmt.Errorf("epoll set non-blocking: %w", err)
	}
	f := os.NewFile(uintptr(ep), "httpserve-epoll")
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("epoll in the poller: %w", err)
	}
	w := &watcher{f: f, ep: ep, rc: rc, peers: map[uint64]*peer{}}
	go w.run()
	return w, nil
}

// add registers c's socket; nil when c has none or the registration
// fails (the connection is then not watched).
func (w *watcher) add(c net.Conn) *peer {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &peer{fd: -1}
	if rc.Control(func(fd uintptr) { p.fd = int(fd) }) != nil || p.fd < 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next++
	p.id = w.next
	// EPOLLET is 1<<31: negative in amd64's syscall package, positive in
	// arm64's; masking gives the same uint32 on both
	ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | syscall.EPOLLET&0xffffffff}
	ev.Fd, ev.Pad = int32(uint32(p.id)), int32(uint32(p.id>>32))
	if syscall.EpollCtl(w.ep, syscall.EPOLL_CTL_ADD, p.fd, &ev) != nil {
		return nil
	}
	w.peers[p.id] = p
	return p
}

// remove forgets p (its socket is closed, or about to be).
func (w *watcher) remove(p *peer) {
	w.mu.Lock()
	delete(w.peers, p.id)
	w.mu.Unlock()
}

// close stops the goroutine and releases the set.
func (w *watcher) close() { _ = w.f.Close() }

// run waits for peers' closes and cancels their requests in flight.
func (w *watcher) run() {
	var evs [32]syscall.EpollEvent
	var n int
	wait := func(fd uintptr) bool {
		k, err := syscall.EpollWait(int(fd), evs[:], 0)
		n = max(k, 0)
		return n > 0 || (err != nil && err != syscall.EINTR)
	}
	for {
		if err := w.rc.Read(wait); err != nil {
			return // closed
		}
		for i := range n {
			w.peerClosed(uint64(uint32(evs[i].Fd)) | uint64(uint32(evs[i].Pad))<<32)
		}
	}
}

// peerClosed cancels the request in flight on the connection with id,
// unless the socket still holds unread bytes (a pipelined request: as
// net/http's background read would have read its first byte and not
// cancelled).
func (w *watcher) peerClosed(id uint64) {
	w.mu.Lock()
	p := w.peers[id]
	if p != nil {
		// Under mu: the connection's goroutine removes p before its
		// socket is closed, so fd is still this socket.
		var b [1]byte
		n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(p.fd), uintptr(unsafe.Pointer(&b[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		if e == 0 && n > 0 {
			p = nil
		}
	}
	w.mu.Unlock()
	if p == nil {
		return
	}
	p.mu.Lock()
	p.gone = true
	cancel := p.cancel
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
