package e2etest

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	ssend "github.com/sluice-llm/sluice/api-frontend/sse"
)

// BenchmarkSendFloor measures the system-call floor under the frontend's
// per-token figure at 256 streams: one send(2) (MSG_DONTWAIT, through
// RawSyscall6, as the frontend's direct path) of a 150-byte chunk to each
// of 256 loopback TCP connections per round, read by a separate client
// process (this test binary re-run as TestSendFloorReader), on a locked
// thread whose CPU comes from its CPU clock (CLOCK_THREAD_CPUTIME_ID),
// split into user and system time in getrusage(RUSAGE_THREAD)'s ratio.
// Each -benchtime iteration is one round (256 sends).
//
//	SLUICE_E2E_BIN=bin go test -run XXX -bench SendFloor -benchtime 400x ./api-frontend/e2etest/
//
// Sub-benchmarks:
//   - paced: 20 ms between rounds (the sim engine's step), so the reader is
//     asleep at each round's first sends: the frontend's pattern;
//   - busy: rounds back to back (the reader is still draining);
//   - unread: the reader connects and never reads: the sender's cost
//     without waking anyone (the receive path itself still runs);
//   - uring: as paced, but each round's 256 sends are one io_uring_enter
//     (IORING_OP_SEND, MSG_DONTWAIT) through the frontend's own batched
//     sender (sse.Batch, which copies each chunk): what batching an engine
//     step's sends into one system call saves;
//   - uring-busy: as busy, batched as uring.
//
// On loopback the receiver's TCP work (softirq) and its wake-up run inside
// the sender's send(2) and are charged to the sender's system time; what
// the reader process itself spends (its wake-up, read(2), Go scheduler) is
// reader-cpu-us/send (the on-CPU time of all its threads from
// /proc/<pid>/task/*/schedstat over the measured rounds, pauses included,
// so everything it does for the sends), and total-cpu-us/send is the two
// together: the whole machine's CPU per chunk on loopback.
func BenchmarkSendFloor(b *testing.B) {
	for _, mode := range []string{"paced", "busy", "unread", "uring", "uring-busy"} {
		b.Run(mode, func(b *testing.B) { sendFloor(b, mode) })
	}
}

const (
	floorConns = 256
	floorChunk = 150
)

func sendFloor(b *testing.B, mode string) {
	rounds := b.N
	if mode == "unread" {
		rounds = min(rounds, 200) // stay inside the receive buffers
	}
	b.ResetTimer()
	f := measureSendFloor(b, mode, rounds)
	b.StopTimer()
	b.ReportMetric(f.cpu, "cpu-us/send")
	b.ReportMetric(f.sys, "sys-us/send")
	b.ReportMetric(f.user, "user-us/send")
	b.ReportMetric(f.reader, "reader-cpu-us/send")
	b.ReportMetric(f.cpu+f.reader, "total-cpu-us/send")
}

// sendFloorResult is one measureSendFloor: the sending thread's CPU per
// send (all, system, user) and the reader process's, in µs.
type sendFloorResult struct{ cpu, sys, user, reader float64 }

// measureSendFloor runs rounds rounds of BenchmarkSendFloor's sends in
// mode (paced, busy, unread, uring, uring-busy) and returns the CPU per
// send.
func measureSendFloor(b testing.TB, mode string, rounds int) sendFloorResult {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestSendFloorReader$")
	cmd.Env = append(os.Environ(), "SLUICE_FLOOR_READER="+ln.Addr().String(), "SLUICE_FLOOR_MODE="+mode,
		"SLUICE_E2E_BIN="+os.TempDir())
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var fds []int
	var conns []net.Conn
	for len(conns) < floorConns {
		c, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
		rc, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			b.Fatal(err)
		}
		_ = rc.Control(func(fd uintptr) { fds = append(fds, int(fd)) })
	}
	chunk := make([]byte, floorChunk)
	for i := range chunk {
		chunk[i] = 'x'
	}
	type result struct {
		cpu       time.Duration // the thread's CPU clock over the sends
		user, sys time.Duration // getrusage's split (tick-sampled: a ratio only)
		sends     int
		err       error
	}
	done := make(chan result)
	reader0, err := threadsCPU(cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	var ring *ssend.Batch // the frontend's batched sender (sse.Batch)
	busy := mode == "busy" || mode == "uring-busy"
	if strings.HasPrefix(mode, "uring") {
		if ring, err = ssend.NewBatch(floorConns); err != nil {
			b.Skip("SKIP: io_uring: ", err)
		}
		defer ring.Close()
	}
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var r0, r1 syscall.Rusage
		var res result
		p := uintptr(unsafe.Pointer(&chunk[0]))
		var pause time.Duration
		for i := 0; i < rounds && res.err == nil; i++ {
			if !busy {
				// Not counted: the rusage window covers the sends only.
				t := time.Now()
				time.Sleep(20 * time.Millisecond)
				pause += time.Since(t)
			}
			_ = syscall.Getrusage(1 /* RUSAGE_THREAD */, &r0)
			c0 := threadClock()
			if ring != nil {
				for _, fd := range fds {
					ring.Add(fd, chunk)
				}
				res.err = ring.Flush()
				for i := range fds {
					if n, err := ring.Result(i); n > 0 {
						res.sends++
					} else if err != syscall.EAGAIN {
						res.err = err
					}
				}
				ring.Reset()
			} else {
				for _, fd := range fds {
					_, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(fd), p, floorChunk, syscall.MSG_DONTWAIT|syscall.MSG_NOSIGNAL, 0, 0)
					if e != 0 && e != syscall.EAGAIN {
						res.err = e
						break
					}
					res.sends++
				}
			}
			res.cpu += threadClock() - c0
			_ = syscall.Getrusage(1, &r1)
			res.user += time.Duration(r1.Utime.Nano() - r0.Utime.Nano())
			res.sys += time.Duration(r1.Stime.Nano() - r0.Stime.Nano())
		}
		runtime.KeepAlive(chunk)
		done <- res
	}()
	res := <-done
	if !busy {
		time.Sleep(20 * time.Millisecond) // the reader drains the last round
	}
	reader1, err := threadsCPU(cmd.Process.Pid)
	if res.err != nil {
		b.Fatal(res.err)
	}
	if err != nil {
		b.Fatal(err)
	}
	// The CPU per send is the thread's CPU clock, which counts the running
	// thread up to the moment it is read. getrusage's thread times are not
	// a measure of a window shorter than the scheduler tick (4 ms here):
	// they come from the thread's run time as last updated by the
	// scheduler (a tick, a switch, a wake-up on its CPU), so the end of each
	// round's sends was mostly counted after the window, in the pause:
	// they read 1.1–1.4 µs per send where the clock reads ≈ 3–4 (session
	// 13). They still give the user/system ratio, summed over the rounds.
	n := float64(res.sends)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / n }
	sysShare := 1.0
	if t := res.user + res.sys; t > 0 {
		sysShare = float64(res.sys) / float64(t)
	}
	cpu := us(res.cpu)
	return sendFloorResult{cpu: cpu, sys: cpu * sysShare, user: cpu * (1 - sysShare), reader: us(reader1 - reader0)}
}

// threadClock returns the calling thread's CPU time so far
// (CLOCK_THREAD_CPUTIME_ID: exact to the moment of the call).
func threadClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// threadsCPU returns the on-CPU time of every thread of process pid so far
// (the first field of /proc/<pid>/task/<tid>/schedstat, in nanoseconds:
// finer than /proc/<pid>/stat's 10 ms ticks). A thread that exited
// between two readings drops out of the sum; the reader's threads live
// as long as it does.
func threadsCPU(pid int) (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("read reader threads: %w", err)
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, fmt.Errorf("schedstat of thread %s: %q", t.Name(), b)
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("schedstat of thread %s: %w", t.Name(), err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}

// TestSendFloorReader is BenchmarkSendFloor's client process: it opens the
// connections and drains them (or, in mode unread, only holds them).
func TestSendFloorReader(t *testing.T) {
	addr := os.Getenv("SLUICE_FLOOR_READER")
	if addr == "" {
		t.Skip("SKIP: BenchmarkSendFloor's reader process (runs only when the benchmark starts it)")
	}
	var wg sync.WaitGroup
	for i := 0; i < floorConns; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if os.Getenv("SLUICE_FLOOR_MODE") == "unread" {
			defer c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = io.CopyBuffer(io.Discard, c, make([]byte, 4096))
			c.Close()
		}()
	}
	if os.Getenv("SLUICE_FLOOR_MODE") == "unread" {
		time.Sleep(time.Hour) // until the benchmark kills it
	}
	wg.Wait()
	fmt.Fprintln(os.Stderr, "reader done:", strconv.Itoa(floorConns), "connections")
}
