package sse

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"runtime/trace"
	"testing"

	xtrace "golang.org/x/exp/trace"
)

// TestFlushNoSyscallHook checks that Flush (the sends and the thread-clock
// reads around them) makes only raw system calls, none through the
// runtime's entersyscall: Flush is the first system call of most engine
// steps, and an entersyscall after the frontend's idle gap wakes the
// runtime's sysmon thread into 20 µs polling (see threadCPU). The runtime's
// execution trace records every entersyscall as the goroutine's move to
// the syscall state; the test flushes while tracing and fails on any such
// move of its own goroutine.
func TestFlushNoSyscallHook(t *testing.T) {
	if trace.IsEnabled() {
		t.Skip("a trace is already running")
	}
	for name, b := range batchKinds(t, 4) {
		t.Run(name, func(t *testing.T) {
			fd, peer := sockPair(t)
			msg := []byte("data: z\n\n")
			var buf bytes.Buffer
			if err := trace.Start(&buf); err != nil {
				t.Fatalf("start trace: %v", err)
			}
			runtime.LockOSThread()
			var flushErr error
			trace.WithRegion(t.Context(), "flush", func() {
				for range 3 {
					b.Add(fd, msg)
					if flushErr = b.Flush(); flushErr != nil {
						break
					}
					b.Reset()
				}
			})
			runtime.UnlockOSThread()
			trace.Stop()
			if flushErr != nil {
				t.Fatal(flushErr)
			}
			got := make([]byte, 64)
			_, _ = io.ReadAtLeast(peer, got, 3*len(msg))
			if n := syscallsInRegion(t, &buf, "flush"); n > 0 {
				t.Fatalf("Flush entered %d system calls through entersyscall; want raw system calls only", n)
			}
		})
	}
}

// syscallsInRegion counts the moves to the syscall state of the goroutine
// that ran the trace region named region, while inside it.
func syscallsInRegion(t *testing.T, r io.Reader, region string) int {
	t.Helper()
	rd, err := xtrace.NewReader(r)
	if err != nil {
		t.Fatalf("read trace: %v", err)
	}
	var g xtrace.GoID = xtrace.NoGoroutine
	seen, n := false, 0
	for {
		ev, err := rd.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read trace: %v", err)
		}
		switch ev.Kind() {
		case xtrace.EventRegionBegin:
			if ev.Region().Type == region {
				g, seen = ev.Goroutine(), true
			}
		case xtrace.EventRegionEnd:
			if ev.Region().Type == region {
				g = xtrace.NoGoroutine
			}
		case xtrace.EventStateTransition:
			st := ev.StateTransition()
			if g == xtrace.NoGoroutine || st.Resource.Kind != xtrace.ResourceGoroutine || st.Resource.Goroutine() != g {
				continue
			}
			if _, to := st.Goroutine(); to == xtrace.GoSyscall {
				n++
			}
		}
	}
	if !seen {
		t.Fatalf("trace has no region %q", region)
	}
	return n
}
