package cpu

import (
	"runtime"
	"sync/atomic"
	"time"
)

// OpStats are figures of the backend's parallel ops that RecordOps
// collects: how much CPU their chunks took and how long the ops would
// take on free cores. On a machine shared with other processes wall time
// says little about two free cores, but a chunk's thread CPU time does
// not count the time its thread waited for a core, so Makespan against
// ChunkCPU/Threads measures the end-of-op imbalance of the pool's split
// (docs/bench/f16-bf16.md, "Wall against CPU").
type OpStats struct {
	// Ops is the number of parallel ops recorded (ops small enough to run
	// on the caller alone are not parallel ops).
	Ops uint64
	// ChunkCPU is the thread CPU time of the ops' chunks (Linux; zero on
	// other systems).
	ChunkCPU time.Duration
	// Makespan sums, over the ops, the time that Threads equal threads,
	// all free, would take to run the op's chunks at their measured
	// costs, each thread taking the next chunk when it is done with its
	// last, as the pool hands them out.
	Makespan time.Duration
	// Threads is the number of threads the ops were split over.
	Threads int
	// AwaitCPU is the thread CPU time the pool's workers spent spinning
	// for the next op's chunks (through the caller's serial code, the
	// other threads' last chunks and the runner's code between steps),
	// counted once a worker is locked to its OS thread, i.e. from its
	// first chunk after RecordOps(true) (Linux; zero elsewhere). The
	// sleeps themselves use no CPU; the wake-ups' system calls are not
	// in it.
	AwaitCPU time.Duration
	// JoinCPU is the thread CPU time the caller spent waiting, after its
	// last chunk of an op, for the workers' last chunks (Linux; zero
	// elsewhere).
	JoinCPU time.Duration
	// Sleeps counts the times a worker ran out of spin and went to sleep
	// (each one a wake-up, through the runtime or a futex, for the next op).
	Sleeps uint64
}

// Imbalance returns Makespan / (ChunkCPU / Threads) − 1: the fraction of
// an op's time on free cores that its threads would spend waiting for
// each other at its end (0 for no ops).
func (s OpStats) Imbalance() float64 {
	if s.ChunkCPU <= 0 || s.Threads <= 0 {
		return 0
	}
	return float64(s.Makespan)/(float64(s.ChunkCPU)/float64(s.Threads)) - 1
}

// opStats is the pool's recording for OpStats, made by the first
// RecordOps(true) and held through pool.st (an atomic pointer, nil until
// then, so that the pool's own fields keep their size and layout). cost[c]
// is written by whichever thread ran chunk c of the current op and read by
// the caller once the op has completed; on is atomic because a worker that
// wakes late for a finished op reads it while the caller may be between
// ops.
type opStats struct {
	on       atomic.Bool
	cost     []int64 // per chunk of the current op, thread CPU ns
	finish   []int64 // per thread, greedyMakespan's scratch
	ops      uint64
	chunkCPU int64
	makespan int64
	joinCPU  int64 // the caller's, see OpStats.JoinCPU

	// the workers': see OpStats.AwaitCPU and Sleeps
	awaitCPU atomic.Int64
	sleeps   atomic.Uint64
}

// RecordOps turns the recording of OpStats on (resetting it) or off. It
// must be called between ops, from the goroutine that issues them.
// Recording reads the running thread's CPU clock before and after each
// chunk and keeps the pool's threads on their OS threads (so the Go
// runtime may now and then start a thread, an allocation, when one of
// them blocks); it is for benchmarks and diagnostics, not for serving.
func (b *Backend) RecordOps(on bool) {
	s := b.pool.st.Load()
	if s == nil {
		if !on {
			return
		}
		s = &opStats{cost: make([]int64, len(b.pool.bounds)), finish: make([]int64, b.pool.n)}
		b.pool.st.Store(s)
	}
	s.on.Store(on)
	if on {
		s.ops, s.chunkCPU, s.makespan, s.joinCPU = 0, 0, 0, 0
		s.awaitCPU.Store(0)
		s.sleeps.Store(0)
	}
}

// OpStats returns what RecordOps recorded since it was last turned on.
func (b *Backend) OpStats() OpStats {
	s := b.pool.st.Load()
	if s == nil {
		return OpStats{Threads: b.pool.n}
	}
	return OpStats{
		Ops: s.ops, ChunkCPU: time.Duration(s.chunkCPU), Makespan: time.Duration(s.makespan), Threads: b.pool.n,
		AwaitCPU: time.Duration(s.awaitCPU.Load()), JoinCPU: time.Duration(s.joinCPU), Sleeps: s.sleeps.Load(),
	}
}

// runChunk runs chunk c of the current op on worker w, timing it on the
// thread's CPU clock when recording.
func (p *pool) runChunk(c, w int) {
	s := p.st.Load()
	if s == nil || !s.on.Load() {
		p.t.run(p.bounds[c], p.bounds[c+1], w)
		return
	}
	c0 := threadCPU()
	p.t.run(p.bounds[c], p.bounds[c+1], w)
	s.cost[c] = threadCPU() - c0
}

// lockForStats keeps the calling goroutine on its OS thread while
// recording, so that its thread CPU clock is the goroutine's, and reports
// whether it did (then unlockForStats must follow).
func (p *pool) lockForStats() bool {
	if p.recording() {
		runtime.LockOSThread()
		return true
	}
	return false
}

// recording reports whether RecordOps is on.
func (p *pool) recording() bool {
	return p.stats() != nil
}

// stats returns the recording while RecordOps is on, else nil.
func (p *pool) stats() *opStats {
	if s := p.st.Load(); s != nil && s.on.Load() {
		return s
	}
	return nil
}

// endOp adds a completed op of chunks chunks to the statistics.
func (s *opStats) endOp(chunks int) {
	cost := s.cost[:chunks]
	var sum int64
	for _, c := range cost {
		sum += c
	}
	s.ops++
	s.chunkCPU += sum
	s.makespan += greedyMakespan(cost, s.finish)
}

// greedyMakespan returns when len(finish) equal threads would be done with
// chunks of the given costs handed out in order, each to the thread that
// is free first (the lowest-numbered one on a tie). finish is scratch.
func greedyMakespan(cost, finish []int64) int64 {
	clear(finish)
	for _, c := range cost {
		i := 0
		for j := 1; j < len(finish); j++ {
			if finish[j] < finish[i] {
				i = j
			}
		}
		finish[i] += c
	}
	var m int64
	for _, f := range finish {
		m = max(m, f)
	}
	return m
}
