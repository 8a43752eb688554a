package sse

import (
	"bytes"
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
)

// batchKinds are the Batches under test: io_uring's (skipped where the
// kernel refuses a ring) and the send(2) loop.
func batchKinds(t *testing.T, max int) map[string]*Batch {
	t.Helper()
	kinds := map[string]*Batch{"loop": NewLoopBatch(max)}
	if b, err := NewBatch(max); err == nil {
		kinds["io_uring"] = b
		t.Cleanup(b.Close)
	} else if !errors.Is(err, ErrNoRing) {
		t.Fatalf("NewBatch: %v does not wrap ErrNoRing", err)
	} else {
		t.Logf("no io_uring here: %v", err)
	}
	return kinds
}

// sockPair returns a connected non-blocking stream socket pair (the
// sender's end first) with small buffers, closed at the test's end.
func sockPair(t *testing.T) (int, *os.File) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = syscall.SetsockoptInt(fds[0], syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096)
	t.Cleanup(func() { _ = syscall.Close(fds[0]) })
	peer := os.NewFile(uintptr(fds[1]), "peer")
	t.Cleanup(func() { _ = peer.Close() })
	return fds[0], peer
}

// fill sends to fd until its buffer is full.
func fill(t *testing.T, fd int) {
	t.Helper()
	junk := make([]byte, 4096)
	for {
		if _, err := sendNonBlocking(fd, junk); err != nil {
			if !errors.Is(err, syscall.EAGAIN) {
				t.Fatal(err)
			}
			return
		}
	}
}

// TestBatch queues one send to each of several sockets (taken whole, a
// full socket, a closed peer, a chunk larger than the socket takes) and
// checks every result and the bytes each peer reads, over two rounds of
// the same Batch, for each kind.
func TestBatch(t *testing.T) {
	for name, b := range batchKinds(t, 8) {
		t.Run(name, func(t *testing.T) {
			for round := range 2 {
				okFD, okPeer := sockPair(t)
				fullFD, _ := sockPair(t)
				fill(t, fullFD)
				goneFD, gonePeer := sockPair(t)
				_ = gonePeer.Close()
				bigFD, bigPeer := sockPair(t)
				msg := []byte("data: hello\n\n")
				big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
				idx := []int{b.Add(okFD, msg), b.Add(fullFD, msg), b.Add(goneFD, msg), b.Add(bigFD, big)}
				msg[0] = 'X' // Add copied it
				if b.Len() != 4 || b.Full() {
					t.Fatalf("round %d: Len %d Full %v", round, b.Len(), b.Full())
				}
				if err := b.Flush(); err != nil {
					t.Fatalf("round %d: Flush: %v", round, err)
				}
				if n, err := b.Result(idx[0]); n != len(msg) || err != nil {
					t.Errorf("round %d: whole send: %d, %v", round, n, err)
				}
				if n, err := b.Result(idx[1]); n != 0 || !errors.Is(err, syscall.EAGAIN) {
					t.Errorf("round %d: full socket: %d, %v; want 0, EAGAIN", round, n, err)
				}
				if n, err := b.Result(idx[2]); n != 0 || !errors.Is(err, syscall.EPIPE) {
					t.Errorf("round %d: closed peer: %d, %v; want 0, EPIPE", round, n, err)
				}
				n, err := b.Result(idx[3])
				if n <= 0 || n >= len(big) || err != nil {
					t.Errorf("round %d: big send: %d of %d, %v; want a part", round, n, len(big), err)
				}
				if !bytes.Equal(b.Bytes(idx[3]), big) || string(b.Bytes(idx[0])) != "data: hello\n\n" {
					t.Errorf("round %d: Bytes do not return what was queued", round)
				}
				got := make([]byte, 64)
				k, _ := io.ReadAtLeast(okPeer, got, len(msg))
				if string(got[:k]) != "data: hello\n\n" {
					t.Errorf("round %d: peer read %q", round, got[:k])
				}
				part := make([]byte, n)
				if _, err := io.ReadFull(bigPeer, part); err != nil || !bytes.Equal(part, big[:n]) {
					t.Errorf("round %d: big peer read %v, equal %v", round, err, bytes.Equal(part, big[:n]))
				}
				b.Reset()
				if b.Len() != 0 {
					t.Fatalf("Reset left %d", b.Len())
				}
			}
		})
	}
}

// TestBatchFull checks that a batch takes max sends, an empty Flush does
// nothing, and a round allocates nothing once the batch has grown.
func TestBatchFull(t *testing.T) {
	for name, b := range batchKinds(t, 3) {
		t.Run(name, func(t *testing.T) {
			if err := b.Flush(); err != nil {
				t.Fatalf("empty Flush: %v", err)
			}
			fds := make([]int, 3)
			peers := make([]*os.File, 3)
			for i := range fds {
				fds[i], peers[i] = sockPair(t)
			}
			msg := []byte("data: x\n\n")
			round := func() {
				for _, fd := range fds {
					if b.Full() {
						t.Fatal("Full before max sends")
					}
					b.Add(fd, msg)
				}
				if !b.Full() {
					t.Fatal("not Full after max sends")
				}
				if err := b.Flush(); err != nil {
					t.Fatal(err)
				}
				for i := range fds {
					if n, err := b.Result(i); n != len(msg) || err != nil {
						t.Fatalf("send %d: %d, %v", i, n, err)
					}
				}
				b.Reset()
				buf := make([]byte, 64)
				for _, p := range peers {
					_, _ = p.Read(buf)
				}
			}
			round()
			if a := testing.AllocsPerRun(20, func() {
				for _, fd := range fds {
					b.Add(fd, msg)
				}
				_ = b.Flush()
				b.Reset()
			}); a != 0 {
				t.Errorf("%v allocations per round; want 0", a)
			}
		})
	}
}

// TestBatchRingFails breaks a ring under its Batch (its descriptor
// closed, as when the kernel refuses io_uring_enter): Flush reports the
// error, the sends still go out with send(2), and the Batch then works
// without the ring.
func TestBatchRingFails(t *testing.T) {
	b, err := NewBatch(4)
	if err != nil {
		t.Skipf("no io_uring here: %v", err)
	}
	defer b.Close()
	_ = syscall.Close(b.ring.fd)
	b.ring.fd = -1
	fd, peer := sockPair(t)
	msg := []byte("data: y\n\n")
	for round := range 2 {
		i := b.Add(fd, msg)
		err := b.Flush()
		if (round == 0) != (err != nil) {
			t.Fatalf("round %d: Flush: %v", round, err)
		}
		if b.Ring() {
			t.Fatal("the failed ring is still used")
		}
		if n, err := b.Result(i); n != len(msg) || err != nil {
			t.Fatalf("round %d: %d, %v", round, n, err)
		}
		got := make([]byte, 64)
		if k, _ := io.ReadAtLeast(peer, got, len(msg)); string(got[:k]) != string(msg) {
			t.Fatalf("round %d: peer read %q", round, got[:k])
		}
		b.Reset()
	}
}

// TestBatchSendCPU checks that Flush counts its sends' CPU time: it grows
// with every flush that sends, and not with an empty one.
func TestBatchSendCPU(t *testing.T) {
	for name, b := range batchKinds(t, 4) {
		t.Run(name, func(t *testing.T) {
			fd, peer := sockPair(t)
			msg := []byte("data: z\n\n")
			last := b.SendCPU()
			for round := range 3 {
				b.Add(fd, msg)
				if err := b.Flush(); err != nil {
					t.Fatal(err)
				}
				b.Reset()
				if got := b.SendCPU(); got <= last {
					t.Fatalf("round %d: SendCPU %v after %v", round, got, last)
				}
				last = b.SendCPU()
				got := make([]byte, 64)
				_, _ = io.ReadAtLeast(peer, got, len(msg))
			}
			if err := b.Flush(); err != nil || b.SendCPU() != last {
				t.Fatalf("empty Flush: %v, SendCPU %v → %v", err, last, b.SendCPU())
			}
		})
	}
}
