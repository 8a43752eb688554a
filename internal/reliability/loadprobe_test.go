package reliability

import (
	"fmt"
	"math"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// rusageThread is Linux's RUSAGE_THREAD (the syscall package names only
// RUSAGE_SELF and RUSAGE_CHILDREN).
const rusageThread = 1

// loadProbe measures how much slower than its own CPU time a fixed piece of
// CPU-bound work runs on this machine right now: its stretch is wall time
// over thread CPU time, summed over chunks of work run on one locked OS
// thread. 1 means the probe had a CPU to itself; 5 means a CPU-bound step
// took five times its CPU time (other runnable threads of this machine —
// other developers' builds, or this test's own processes — held the CPUs).
// Tests that bound wall-clock latency on a shared machine scale their bound
// by the stretch, so contention loosens it and a real slowdown (one that
// does not come from waiting for a CPU) does not.
type loadProbe struct {
	mu        sync.Mutex
	wall, cpu time.Duration // since the last take
	err       error
	stop      chan struct{}
	done      chan struct{}
}

// probeChunk is the CPU time of one chunk of probe work: longer than the
// scheduler's time slice, so a busy machine preempts it. probeGap is the
// pause between chunks; the probe costs chunk/(chunk+gap) of one CPU.
const (
	probeChunk = 4 * time.Millisecond
	probeGap   = 36 * time.Millisecond
)

// startLoadProbe starts the probe's goroutine; stop ends it.
func startLoadProbe() *loadProbe {
	p := &loadProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// threadCPU returns the calling OS thread's CPU time (user + system).
func threadCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, fmt.Errorf("getrusage(RUSAGE_THREAD): %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// run spins for probeChunk of thread CPU time, adds the chunk's wall and
// CPU time, sleeps probeGap, and repeats until stop.
func (p *loadProbe) run() {
	defer close(p.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	x := uint64(88172645463325252)
	for {
		select {
		case <-p.stop:
			return
		default:
		}
		w0 := time.Now()
		c0, err := threadCPU()
		if err != nil {
			p.fail(err)
			return
		}
		c := c0
		for c-c0 < probeChunk {
			for range 2000 { // xorshift: pure CPU work the compiler keeps
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
			}
			if c, err = threadCPU(); err != nil {
				p.fail(err)
				return
			}
		}
		w := time.Since(w0)
		p.mu.Lock()
		p.wall += w
		p.cpu += c - c0
		p.mu.Unlock()
		select {
		case <-p.stop:
			return
		case <-time.After(probeGap):
		}
	}
}

// fail records err; take then reports it.
func (p *loadProbe) fail(err error) {
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
}

// take returns the stretch (≥ 1) measured since the previous take and
// starts a new window of length window. With no chunk completed in the
// window (a machine so busy that none finished) the stretch is at least
// the window over one chunk's CPU time, and that is what it reports.
func (p *loadProbe) take(window time.Duration) (float64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return 0, p.err
	}
	wall, cpu := p.wall, p.cpu
	p.wall, p.cpu = 0, 0
	if cpu <= 0 {
		return max(1, float64(window)/float64(probeChunk)), nil
	}
	return max(1, float64(wall)/float64(cpu)), nil
}

// close stops the probe and waits for its goroutine.
func (p *loadProbe) close() {
	close(p.stop)
	<-p.done
}

// TestLoadProbe checks the probe against contention it makes itself:
// 4×NumCPU busy-looping shell processes leave the probe's thread about one
// CPU share in 4×NumCPU/NumCPU+1, so its stretch must reach well above 1 (it
// can only be higher on a busier machine), and the probe's own window
// before them stays finite and ≥ 1. The spinners are separate processes:
// goroutines of this process would only queue behind its GOMAXPROCS Ps,
// which the probe's thread-CPU clock does not see (the probe measures
// contention for the machine's CPUs, not for this process's Ps).
func TestLoadProbe(t *testing.T) {
	p := startLoadProbe()
	defer p.close()
	time.Sleep(400 * time.Millisecond)
	quiet, err := p.take(400 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if quiet < 1 || math.IsInf(quiet, 0) || math.IsNaN(quiet) {
		t.Fatalf("stretch %v; want a finite value ≥ 1", quiet)
	}
	n := 4 * runtime.NumCPU()
	var spinners []*exec.Cmd
	defer func() {
		for _, c := range spinners {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	for range n {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			t.Fatalf("start spinner: %v", err)
		}
		spinners = append(spinners, c)
	}
	time.Sleep(time.Second)
	busy, err := p.take(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stretch alone %.2f, with %d spinning processes on %d CPUs %.2f", quiet, n, runtime.NumCPU(), busy)
	if busy < 2 {
		t.Errorf("stretch with %d processes spinning on %d CPUs is %.2f; want ≥ 2", n, runtime.NumCPU(), busy)
	}
}
