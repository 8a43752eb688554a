package cpu

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
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
	// SerialCPU is the thread CPU time the caller spent between the end of
	// one parallel op and the start of the next (its serial code: ops too
	// small for the pool, an op's own preparation such as activation
	// quantization or packing, the model's and the runner's code between
	// ops and steps), and SerialWall the wall time of the same gaps (which
	// adds the time the caller's thread waited for a core). Only gaps the
	// caller spent on one OS thread count (Linux; zero elsewhere): the
	// issuing goroutine should be locked to its thread while recording
	// (runtime.LockOSThread), as the runner's benchmarks do. SerialGaps
	// counts the gaps measured; SerialSites splits them by call site.
	SerialCPU, SerialWall time.Duration
	SerialGaps            uint64
}

// SerialSite is the serial time before the parallel ops issued from one
// call site (see OpStats.SerialCPU): Site names the first function outside
// this package on the op's call stack, with its line, and the Backend
// method it called.
type SerialSite struct {
	Site      string
	CPU, Wall time.Duration
	Count     uint64
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

	// the caller's serial gaps (OpStats.SerialCPU): its thread, thread CPU
	// clock and wall clock at the end of the last op (tid 0: none yet), the
	// totals, and per call stack of the op that ended a gap
	lastTid               int
	lastCPU               int64
	lastWall              time.Time
	serialCPU, serialWall int64
	gaps                  uint64
	sites                 map[[serialDepth]uintptr]*serialAcc
}

// serialDepth is how many return addresses identify an op's call site.
const serialDepth = 8

// serialAcc accumulates one call site's serial gaps.
type serialAcc struct {
	cpu, wall int64
	n         uint64
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
		s.lastTid, s.serialCPU, s.serialWall, s.gaps = 0, 0, 0, 0
		s.sites = make(map[[serialDepth]uintptr]*serialAcc)
	}
}

// SerialSites returns the serial gaps recorded since RecordOps was last
// turned on, by the call site of the op that ended each gap, the largest
// CPU first.
func (b *Backend) SerialSites() []SerialSite {
	s := b.pool.st.Load()
	if s == nil {
		return nil
	}
	byName := map[string]*SerialSite{}
	for pcs, a := range s.sites {
		name := siteName(pcs[:])
		e := byName[name]
		if e == nil {
			e = &SerialSite{Site: name}
			byName[name] = e
		}
		e.CPU += time.Duration(a.cpu)
		e.Wall += time.Duration(a.wall)
		e.Count += a.n
	}
	out := make([]SerialSite, 0, len(byName))
	for _, e := range byName {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CPU > out[j].CPU })
	return out
}

// siteName names a call stack by its first frame outside this package
// (function and line) and the last frame inside it that is a Backend
// method (the op called).
func siteName(pcs []uintptr) string {
	const pkg = "github.com/sluice-llm/sluice/kernels/cpu."
	fr := runtime.CallersFrames(pcs)
	op := "?"
	for {
		f, more := fr.Next()
		if f.Function == "" {
			break
		}
		if !strings.HasPrefix(f.Function, pkg) {
			i := strings.LastIndex(f.Function, "/")
			return fmt.Sprintf("%s:%d %s", f.Function[i+1:], f.Line, op)
		}
		if m, ok := strings.CutPrefix(f.Function, pkg+"(*Backend)."); ok {
			op = m
		}
		if !more {
			break
		}
	}
	return "? " + op
}

// beginOp ends the caller's serial gap that the op about to start closes
// (see OpStats.SerialCPU); skip is the number of frames above the caller
// of beginOp that belong to the pool.
func (s *opStats) beginOp(skip int) {
	tid, c, w := gettid(), threadCPU(), time.Now()
	if s.lastTid == 0 || tid != s.lastTid {
		return
	}
	var pcs [serialDepth]uintptr
	runtime.Callers(skip+2, pcs[:])
	a := s.sites[pcs]
	if a == nil {
		a = &serialAcc{}
		s.sites[pcs] = a
	}
	dc, dw := c-s.lastCPU, int64(w.Sub(s.lastWall))
	a.cpu += dc
	a.wall += dw
	a.n++
	s.serialCPU += dc
	s.serialWall += dw
	s.gaps++
}

// endOpClock marks the end of an op on the caller: its serial gap starts.
func (s *opStats) endOpClock() {
	s.lastTid, s.lastCPU, s.lastWall = gettid(), threadCPU(), time.Now()
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
		SerialCPU: time.Duration(s.serialCPU), SerialWall: time.Duration(s.serialWall), SerialGaps: s.gaps,
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
