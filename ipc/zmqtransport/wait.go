package zmqtransport

import (
	"fmt"
	"os"
	"syscall"
	"time"

	zmq "github.com/pebbe/zmq4"
)

// fallbackTick is how often a sockWaiter whose descriptor cannot join Go's
// network poller wakes its owner to check the socket.
const fallbackTick = time.Millisecond

// sockWaiter tells a socket's owning goroutine when to look at the socket,
// without a blocking cgo call: it waits for the socket's ZMQ_FD in Go's
// network poller and then signals C (buffered, capacity 1).
//
// ZMQ_FD is edge-triggered and only says "call GetEvents": zmq consumes its
// signal inside any zmq call on the socket (GetEvents, recv, send). So the
// owner must, before every wait on C, drain the socket until GetEvents
// reports no POLLIN, after its last send too. An edge that arrives while the
// waiter goroutine is not waiting is kept by the runtime's poll descriptor,
// so none is lost.
//
// The waiter touches no zmq socket: its goroutine only waits on a duplicate
// of the descriptor, which close releases.
type sockWaiter struct {
	C    chan struct{}
	f    *os.File      // the dup'd ZMQ_FD, in the network poller; nil on fallback
	tick *time.Ticker  // fallback when the descriptor cannot be polled
	stop chan struct{} // ends the fallback ticker goroutine
	done chan struct{}

	waited bool // the waiter goroutine's, for waitOnce
}

// newSockWaiter starts a waiter for sock. It is called by the goroutine that
// owns sock (GetFd is a zmq call). Where the descriptor cannot join the
// network poller it falls back to waking every fallbackTick, and says why.
func newSockWaiter(sock *zmq.Socket) (*sockWaiter, error) {
	w := &sockWaiter{C: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	rc, err := pollableFd(sock)
	if err != nil {
		w.tick = time.NewTicker(fallbackTick)
		go w.runTicker()
		return w, err
	}
	w.f = rc.f
	go w.run(rc.rc)
	return w, nil
}

type pollFile struct {
	f  *os.File
	rc syscall.RawConn
}

// pollableFd duplicates sock's ZMQ_FD and registers the duplicate with Go's
// network poller.
func pollableFd(sock *zmq.Socket) (pollFile, error) {
	fd, err := sock.GetFd()
	if err != nil {
		return pollFile{}, fmt.Errorf("zmq fd: %w", err)
	}
	dup, err := dupFd(fd)
	if err != nil {
		return pollFile{}, fmt.Errorf("dup zmq fd %d: %w", fd, err)
	}
	f := os.NewFile(uintptr(dup), "zmq-fd")
	// A descriptor the poller refused has no deadlines: that is how to
	// tell, since RawConn.Read on it would fail rather than wait.
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return pollFile{}, fmt.Errorf("zmq fd %d not pollable: %w", fd, err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return pollFile{}, fmt.Errorf("zmq fd %d: %w", fd, err)
	}
	return pollFile{f: f, rc: rc}, nil
}

// waitOnce is the RawConn.Read callback: false on its first call makes Read
// wait for readability; true on the next ends the Read. It never reads the
// descriptor (zmq does).
func (w *sockWaiter) waitOnce(uintptr) bool {
	if w.waited {
		return true
	}
	w.waited = true
	return false
}

func (w *sockWaiter) run(rc syscall.RawConn) {
	defer close(w.done)
	wait := w.waitOnce // one closure, not one per wait
	for {
		w.waited = false
		if err := rc.Read(wait); err != nil {
			return // closed
		}
		w.signal()
	}
}

func (w *sockWaiter) runTicker() {
	defer close(w.done)
	for {
		select {
		case <-w.tick.C:
			w.signal()
		case <-w.stop:
			return
		}
	}
}

func (w *sockWaiter) signal() {
	select {
	case w.C <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// close stops the waiter goroutine and closes the duplicate descriptor; the
// zmq socket itself is untouched (close it afterwards).
func (w *sockWaiter) close() {
	if w.f != nil {
		w.f.Close() // wakes the goroutine's Read with an error
	} else {
		close(w.stop)
		w.tick.Stop()
	}
	<-w.done
}

// readable reports whether sock has a message to receive. It is also what
// consumes ZMQ_FD's pending signal, so an owner calls it (until false) before
// waiting on the socket's sockWaiter.
func readable(sock *zmq.Socket) bool {
	ev, err := sock.GetEvents()
	return err == nil && ev&zmq.POLLIN != 0
}
