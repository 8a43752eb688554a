package cpu

import (
	"runtime"
	"sync/atomic"
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
	n     int
	start []chan struct{}
	done  chan struct{}
	quit  chan struct{}

	// claim packs gen<<32 | chunks<<16 | next chunk index; completed
	// counts finished chunks of the current generation.
	claim     atomic.Uint64
	completed atomic.Int32

	// the current op, written before its generation is published: chunk
	// c covers units [bounds[c], bounds[c+1]) (at most 16 chunks per
	// thread, see cut; the slice is made once by newPool)
	t      task
	bounds []int

	st atomic.Pointer[opStats] // Backend.RecordOps; nil until first on
}

func newPool(n int) *pool {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	p := &pool{n: n, done: make(chan struct{}, 1), quit: make(chan struct{}), bounds: make([]int, 16*n+2)}
	p.start = make([]chan struct{}, n)
	for w := 1; w < n; w++ {
		p.start[w] = make(chan struct{}, 1)
		go p.worker(w)
	}
	return p
}

// spinIters bounds how long a worker that ran out of work spins (atomic
// loads, ≈ 1.3 ns each here: ≈ 20 µs) before it sleeps, and
// waitSpinIters how long the caller waiting for the workers' last chunks
// spins (channel length checks, ≈ 5 ns each: ≈ 85 µs). A forward pass
// issues ops back to back, each a few tens of microseconds long at decode,
// with a few microseconds of serial work between them. A sleep is dear: a
// goroutine woken through a channel lands in the waker's local run queue
// (runnext) while the waker keeps running, and the thread that steals it
// first sleeps in the runtime's runqgrab (usleep(3), ≥ 50 µs with Linux's
// timer slack; perf record -e sched:sched_switch). Spinning 8× longer
// (2^17 and 2^15) was measured and dropped: on this shared machine a
// spinning thread mostly waits for one that the OS has descheduled, and
// CPU per token rose; fewer ops per step and chunks that shrink towards
// an op's end (parallelGuided) cut the waits instead.
const (
	spinIters     = 1 << 14
	waitSpinIters = 1 << 14
)

func (p *pool) worker(w int) {
	locked := false
	for {
		gen := p.claim.Load() >> 32
		spun := false
		for i := 0; i < spinIters; i++ {
			if c := p.claim.Load(); c>>32 != gen && int(c&0xffff) < int(c>>16&0xffff) {
				spun = true
				break
			}
		}
		if !spun {
			select {
			case <-p.start[w]:
			case <-p.quit:
				return
			}
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
			p.done <- struct{}{}
		}
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
	p.run(total, align, minPar, false, t)
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
	p.run(total, align, minPar, true, t)
}

func (p *pool) run(total, align, minPar int, guided bool, t task) {
	if total <= 0 {
		return
	}
	align = max(align, 1)
	if p.n == 1 || total < minPar || total <= align {
		t.run(0, total, 0)
		return
	}
	chunks := p.cut(total, align, guided)
	locked := p.lockForStats()
	p.t = t
	p.completed.Store(0)
	gen := p.claim.Load()>>32 + 1
	p.claim.Store(gen<<32 | uint64(chunks)<<16) // publishes the fields above
	for w := 1; w < p.n; w++ {
		select {
		case p.start[w] <- struct{}{}:
		default: // already has a wake-up pending
		}
	}
	if !p.help(0) {
		for i := 0; i < waitSpinIters && len(p.done) == 0; i++ {
		}
		<-p.done
	}
	if locked {
		p.st.Load().endOp(chunks)
		runtime.UnlockOSThread()
	}
	p.t = nil
}

// cut writes the chunk bounds of an op of total units into p.bounds and
// returns the number of chunks.
func (p *pool) cut(total, align int, guided bool) int {
	share := (total + 4*p.n - 1) / (4 * p.n) // about four chunks per thread
	if guided {
		share = (total + 16*p.n - 1) / (16 * p.n) // the smallest chunk
	}
	share = (share + align - 1) / align * align
	c, lo := 0, 0
	for lo < total {
		size := share
		if guided {
			g := (total - lo + 2*p.n - 1) / (2 * p.n)
			size = max(size, (g+align-1)/align*align)
		}
		if c == len(p.bounds)-2 { // not reached: at most 16·n chunks
			size = total - lo
		}
		p.bounds[c] = lo
		lo = min(lo+size, total)
		c++
	}
	p.bounds[c] = total
	return c
}

func (p *pool) close() {
	close(p.quit)
}
