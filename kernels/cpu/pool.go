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

	// the current op, written before its generation is published
	t     task
	total int
	chunk int
}

func newPool(n int) *pool {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	p := &pool{n: n, done: make(chan struct{}, 1), quit: make(chan struct{})}
	p.start = make([]chan struct{}, n)
	for w := 1; w < n; w++ {
		p.start[w] = make(chan struct{}, 1)
		go p.worker(w)
	}
	return p
}

// spinIters bounds how long (atomic loads, some tens of microseconds) a
// worker that ran out of work, and the caller waiting for the workers,
// spin before they sleep. A forward pass issues ops back to back, each a
// few tens of microseconds long at decode; waking a sleeping goroutine
// costs about as much, so without the spin the second thread would join
// most ops late.
const spinIters = 1 << 14

func (p *pool) worker(w int) {
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
		lo := next * p.chunk
		hi := min(lo+p.chunk, p.total)
		p.t.run(lo, hi, w)
		if int(p.completed.Add(1)) == chunks {
			last = true
		}
	}
}

// parallel runs t over [0, total) in chunks whose bounds are multiples of
// align. Work smaller than minPar units runs on the calling goroutine alone.
func (p *pool) parallel(total, align, minPar int, t task) {
	if total <= 0 {
		return
	}
	align = max(align, 1)
	if p.n == 1 || total < minPar || total <= align {
		t.run(0, total, 0)
		return
	}
	// about four chunks per thread, for balance
	chunk := (total + 4*p.n - 1) / (4 * p.n)
	chunk = (chunk + align - 1) / align * align
	chunks := (total + chunk - 1) / chunk
	p.t, p.total, p.chunk = t, total, chunk
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
		for i := 0; i < spinIters && len(p.done) == 0; i++ {
		}
		<-p.done
	}
	p.t = nil
}

func (p *pool) close() {
	close(p.quit)
}
