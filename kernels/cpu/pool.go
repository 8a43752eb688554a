package cpu

import (
	"runtime"
	"sync/atomic"
)

// task is one parallel op: run handles units [lo, hi) on worker w.
type task interface {
	run(lo, hi, w int)
}

// pool is a small set of persistent workers. parallel splits a range of
// work units between the caller (worker 0) and the workers, and returns
// when all are done. Dispatch allocates nothing: the task is a pointer to a
// struct the backend owns.
type pool struct {
	n       int
	start   []chan struct{}
	done    chan struct{}
	pending atomic.Int32
	t       task
	total   int
	align   int
	quit    chan struct{}
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

func (p *pool) worker(w int) {
	for {
		select {
		case <-p.start[w]:
		case <-p.quit:
			return
		}
		lo, hi := p.part(w)
		if lo < hi {
			p.t.run(lo, hi, w)
		}
		if p.pending.Add(-1) == 0 {
			p.done <- struct{}{}
		}
	}
}

// part returns worker w's share of [0, total), split into n nearly equal
// pieces whose bounds are multiples of align.
func (p *pool) part(w int) (int, int) {
	units := (p.total + p.align - 1) / p.align
	lo := units * w / p.n * p.align
	hi := units * (w + 1) / p.n * p.align
	return min(lo, p.total), min(hi, p.total)
}

// parallel runs t over [0, total) in pieces aligned to align. Work smaller
// than minPar units runs on the calling goroutine alone.
func (p *pool) parallel(total, align, minPar int, t task) {
	if total <= 0 {
		return
	}
	if p.n == 1 || total < minPar || total <= align {
		t.run(0, total, 0)
		return
	}
	p.t, p.total, p.align = t, total, max(align, 1)
	p.pending.Store(int32(p.n - 1))
	for w := 1; w < p.n; w++ {
		p.start[w] <- struct{}{}
	}
	lo, hi := p.part(0)
	if lo < hi {
		t.run(lo, hi, 0)
	}
	<-p.done
	p.t = nil
}

func (p *pool) close() {
	close(p.quit)
}
