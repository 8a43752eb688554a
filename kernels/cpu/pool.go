package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// task is one parallel op: run handles units [lo, hi) on worker w.
type task interface {
	run(lo, hi, w int)
}

// pool is a small set of persistent workers. parallel cuts a range of work
// units into chunks that the caller (worker 0) and the workers claim one at
// a time, so that a worker the OS has not scheduled yet (the machine is
// shared) delays nothing: whoever runs takes the next chunk. Dispatch
// allocates nothing: the task is a pointer to a struct the backend owns.
//
// Claims go through one atomic word holding (generation, next chunk); a
// worker that wakes late for an op that has already finished sees a newer
// generation and helps with the current op instead, or goes back to sleep.
type pool struct {
	n int

	// work wakes sleeping workers when an op is published; fin wakes the
	// caller sleeping on the op's last chunks (see wakeup)
	work, fin wakeup
	quit      atomic.Bool

	// claim packs gen<<32 | chunks<<16 | next chunk index; completed
	// counts finished chunks of the current generation.
	claim     atomic.Uint64
	completed atomic.Int32

	// the current op, written before its generation is published: chunk
	// c covers units [bounds[c], bounds[c+1]) (at most maxTail chunks
	// per thread, see cut; the slice is made once by newPool)
	t      task
	bounds []int

	st atomic.Pointer[opStats] // Backend.RecordOps; nil until first on

	workers sync.WaitGroup // the worker goroutines, for close
}

// newPool starts a pool of n threads (the caller and n-1 workers; n <= 0:
// GOMAXPROCS). With futex (Options.FutexSleep) its threads sleep on a
// futex where the system has one and GOMAXPROCS leaves a processor beyond
// the pool's threads (the engine runs with one more,
// engine.computeProcs), and on a sync.Cond otherwise. A
// thread blocked in a system call keeps its processor only while another
// one is idle (the runtime's sysmon retakes it after 20 µs otherwise and
// starts a thread to spin on it): with GOMAXPROCS equal to the threads
// (the runner benchmarks) each futex sleep then costs an extra thread
// switch, measured +10–25 % CPU per token on 110M decode (voluntary
// context switches 45–58k against 12k per 60 steps), where the runtime's
// own park is as cheap; with a spare processor the two cost the same CPU
// and the futex wakes the sleeper without the scheduler's hand-off delay.
func newPool(n int, futex bool) *pool {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	return newPoolWith(n, futex && haveFutex && runtime.GOMAXPROCS(0) > n)
}

// newPoolWith is newPool with the sleep path chosen: futex (where the
// system has one, haveFutex) or the portable sync.Cond. Tests check both.
func newPoolWith(n int, futex bool) *pool {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	p := &pool{n: n, bounds: make([]int, maxTail*n+2)}
	p.work.init(futex)
	p.fin.init(futex)
	for w := 1; w < n; w++ {
		p.workers.Add(1)
		go p.worker(w)
	}
	return p
}

// workerSpin bounds how long a worker that ran out of work spins before
// it sleeps, and joinSpin how long the caller waiting for the workers'
// last chunks spins (the 2^14 channel-length checks this replaced took
// ≈ 85–105 µs). Both are times, read from the clock every 256 atomic
// loads (a load costs 0.3–1.3 ns here, so a count is no bound).
//
// A forward pass issues ops back to back, with a few microseconds of
// serial work between them, but the caller finishes an op's last chunk up
// to a chunk's length (tens to hundreds of µs at 16 sequences) after the
// worker ran out of work: the worker's old spin of 2^14 loads (5–20 µs)
// ran out first at almost every op, so the next op started with the
// worker asleep, and the runtime's wake-up (the woken goroutine waits in
// the waker's runnext until another thread steals it: ≈ 250 µs per wake
// in the engine's trace) left the caller alone for most of it. A 200 µs
// spin covers that gap: on the quiet machine, 16 streams of the 1B
// Q4_K_M file through HTTP 124–130 → 165–173 tok/s and 1 stream 35–37 →
// 37–42 at the same engine CPU (docs/BENCHMARKS.md, session 13); 1 ms
// was no better. (An earlier session measured 8× longer spins, as counts,
// on the loaded shared machine as raising CPU per token: a spinning
// thread mostly waits there for one the OS has descheduled.) Between steps the
// worker sleeps after 200 µs, on a futex where Options.FutexSleep asks
// for it (see wakeup).
const (
	workerSpin = 200 * time.Microsecond
	joinSpin   = 85 * time.Microsecond
)

func (p *pool) worker(w int) {
	defer p.workers.Done()
	locked := false
	for {
		if !p.await(locked) {
			break
		}
		if on := p.recording(); on != locked {
			// on its own OS thread while recording, for the thread CPU
			// clock; back to the shared threads when recording stops
			if on {
				runtime.LockOSThread()
			} else {
				runtime.UnlockOSThread()
			}
			locked = on
		}
		if p.help(w) {
			p.fin.wake()
		}
	}
	if locked {
		runtime.UnlockOSThread()
	}
}

// await returns true once an op has unclaimed chunks, false when the pool
// closes. It spins for workerSpin, then sleeps on p.work, and spins again
// after each wake (the caller may have run the whole op before this thread
// got a core, and the next op follows within microseconds).
//
// While recording, with the worker locked to its OS thread (locked), it
// adds its thread CPU time spent here to the recording's awaitCPU, one
// spin (and wake) at a time.
func (p *pool) await(locked bool) bool {
	s := p.stats()
	if !locked {
		s = nil // the thread's clock may be another goroutine's
	}
	for {
		var c0 int64
		if s != nil {
			c0 = threadCPU()
		}
		var t0 time.Time
		for i := 0; ; i++ {
			if c := p.claim.Load(); int(c&0xffff) < int(c>>16&0xffff) {
				if s != nil {
					s.awaitCPU.Add(threadCPU() - c0)
				}
				return true
			}
			if i&255 != 0 {
				continue
			}
			if i == 0 {
				t0 = time.Now()
			} else if time.Since(t0) > workerSpin {
				break
			}
		}
		if s != nil {
			s.awaitCPU.Add(threadCPU() - c0)
		}
		v := p.work.enter()
		c := p.claim.Load()
		switch {
		case int(c&0xffff) < int(c>>16&0xffff):
			p.work.leave()
			return true
		case p.quit.Load():
			p.work.leave()
			return false
		}
		if r := p.stats(); r != nil {
			r.sleeps.Add(1)
		}
		p.work.sleep(v)
		p.work.leave()
	}
}

// help claims and runs chunks of the current op until none is left. It
// reports whether this call finished the op's last chunk.
func (p *pool) help(w int) bool {
	last := false
	for {
		c := p.claim.Load()
		chunks, next := int(c>>16&0xffff), int(c&0xffff)
		if next >= chunks {
			return last
		}
		if !p.claim.CompareAndSwap(c, c+1) {
			continue
		}
		// A successful claim means the op is still running, so its fields
		// are stable until this chunk completes.
		p.runChunk(next, w)
		if int(p.completed.Add(1)) == chunks {
			last = true
		}
	}
}

// parallel runs t over [0, total) in chunks whose bounds are multiples of
// align. Work smaller than minPar units runs on the calling goroutine alone.
// The chunks are of equal size, about four per thread.
func (p *pool) parallel(total, align, minPar int, t task) {
	p.run(total, align, minPar, 0, t)
}

// parallelGuided is parallel with chunks that shrink as the op runs out of
// work (guided self-scheduling): each is half an even share of the units
// left, but at least 1/16 of a thread's share. The threads then finish
// within a small chunk of each other, where four equal chunks per thread
// leave up to an eighth of the op on one thread while the other waits
// (on its own level in CPU per step on the loaded machine,
// BenchmarkSharedStep1B; the cut costs nothing per chunk). For ops whose chunk cost does not depend on the chunk's size (the
// batch-1 row loops); tiles that re-read their activations per chunk keep
// parallel's chunks.
func (p *pool) parallelGuided(total, align, minPar int, t task) {
	p.run(total, align, minPar, guidedTail, t)
}

// parallelGuidedFine is parallelGuided with the smallest chunk at 1/64 of
// a thread's share (fineTail) instead of 1/16, for ops of many equal,
// costly units whose chunks cost nothing to start (the F16/BF16 panel
// kernels at up to 16 rows: the activations are packed once per op): the
// threads then finish within a quarter of the old smallest chunk of each
// other. At 16 sequences of the 1B F16 file the old last chunks were
// 35–550 µs (the LM head's 1000 rows of 2048 values).
func (p *pool) parallelGuidedFine(total, align, minPar int, t task) {
	p.run(total, align, minPar, fineTail, t)
}

// guidedTail and fineTail are how many of its smallest chunks a thread's
// even share of an op makes under parallelGuided and parallelGuidedFine;
// maxTail bounds them (p.bounds holds maxTail chunks per thread).
const (
	guidedTail = 16
	fineTail   = 64
	maxTail    = 64
)

// run runs t over [0, total) as parallel (tail 0: about four equal chunks
// per thread) or guided with chunks no smaller than a thread's even share
// divided by tail.
func (p *pool) run(total, align, minPar, tail int, t task) {
	if total <= 0 {
		return
	}
	align = max(align, 1)
	if p.n == 1 || total < minPar || total <= align {
		t.run(0, total, 0)
		return
	}
	chunks := p.cut(total, align, tail)
	locked := p.lockForStats()
	if locked {
		p.st.Load().beginOp(1)
	}
	p.t = t
	p.completed.Store(0)
	gen := p.claim.Load()>>32 + 1
	p.claim.Store(gen<<32 | uint64(chunks)<<16) // publishes the fields above
	p.work.wake()
	if !p.help(0) {
		var c0 int64
		if locked {
			c0 = threadCPU()
		}
		p.join(int32(chunks))
		if locked {
			p.st.Load().joinCPU += threadCPU() - c0
		}
	}
	if locked {
		st := p.st.Load()
		st.endOp(chunks)
		st.endOpClock()
		runtime.UnlockOSThread()
	}
	p.t = nil
}

// join waits until the current op's chunks are all complete (the caller
// has claimed the last one, so only chunks that workers run are left): it
// spins for joinSpin (reading the clock every 256 loads), then sleeps on
// p.fin, which the worker that completes the last chunk wakes.
func (p *pool) join(chunks int32) {
	var t0 time.Time
	for i := 0; p.completed.Load() != chunks; i++ {
		if i&255 != 0 {
			continue
		}
		if i == 0 {
			t0 = time.Now()
		} else if time.Since(t0) > joinSpin {
			break
		}
	}
	if p.completed.Load() == chunks {
		return
	}
	for {
		v := p.fin.enter()
		if p.completed.Load() == chunks {
			p.fin.leave()
			return
		}
		p.fin.sleep(v)
		p.fin.leave()
	}
}

// cut writes the chunk bounds of an op of total units into p.bounds and
// returns the number of chunks: about four equal chunks per thread (tail
// 0), or guided chunks, the smallest 1/tail of a thread's share.
func (p *pool) cut(total, align, tail int) int {
	guided := tail > 0
	share := (total + 4*p.n - 1) / (4 * p.n) // about four chunks per thread
	if guided {
		tail = min(tail, maxTail)
		share = (total + tail*p.n - 1) / (tail * p.n) // the smallest chunk
	}
	share = (share + align - 1) / align * align
	c, lo := 0, 0
	for lo < total {
		size := share
		if guided {
			g := (total - lo + 2*p.n - 1) / (2 * p.n)
			size = max(size, (g+align-1)/align*align)
		}
		if c == len(p.bounds)-2 { // not reached: at most maxTail·n chunks
			size = total - lo
		}
		p.bounds[c] = lo
		lo = min(lo+size, total)
		c++
	}
	p.bounds[c] = total
	return c
}

// close stops the workers and waits until they have returned. The pool
// must not be used afterwards.
func (p *pool) close() {
	p.quit.Store(true)
	p.work.wake()
	p.workers.Wait()
}
