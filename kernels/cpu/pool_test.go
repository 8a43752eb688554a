package cpu

import (
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countTask counts the units it was given.
type countTask struct{ units atomic.Int64 }

func (c *countTask) run(lo, hi, _ int) { c.units.Add(int64(hi - lo)) }

// markTask counts, per unit, the times a chunk covered it.
type markTask struct{ seen []atomic.Int32 }

func (m *markTask) run(lo, hi, _ int) {
	for u := lo; u < hi; u++ {
		m.seen[u].Add(1)
	}
}

// TestPoolCovers checks that parallel, parallelGuided and
// parallelGuidedFine hand out every unit exactly once, for totals around
// the chunking boundaries, on 1–3 threads.
// It runs on both sleep paths (futex where there is one, and the
// portable sync.Cond).
func TestPoolCovers(t *testing.T) {
	for _, portable := range []bool{false, true} {
		for _, threads := range []int{1, 2, 3} {
			p := newPoolWith(threads, !portable)
			for _, total := range []int{1, 3, 4, 5, 31, 512, 2048, 3072, 16384, 32000} {
				for _, tail := range []int{0, guidedTail, fineTail} {
					for _, align := range []int{1, 4, 16} {
						m := markTask{seen: make([]atomic.Int32, total)}
						p.run(total, align, 0, tail, &m)
						for u := range m.seen {
							if got := m.seen[u].Load(); got != 1 {
								t.Errorf("portable=%v threads=%d total=%d tail=%d align=%d: unit %d run %d times", portable, threads, total, tail, align, u, got)
								break
							}
						}
					}
				}
			}
			p.close()
		}
	}
}

// needsWorkerTask is an op whose chunks on the caller (worker 0) spin
// until a worker has run a chunk, so it completes only if the op woke a
// worker; it counts its units. The spin does not yield to the Go
// scheduler, as a kernel would not.
type needsWorkerTask struct {
	units   atomic.Int64
	helped  atomic.Bool
	timeout atomic.Bool
}

func (c *needsWorkerTask) run(lo, hi, w int) {
	if w != 0 {
		c.helped.Store(true)
	} else {
		end := time.Now().Add(10 * time.Second)
		for i := 0; !c.helped.Load(); i++ {
			if i&1023 == 0 && time.Now().After(end) {
				c.timeout.Store(true)
				break
			}
		}
	}
	c.units.Add(int64(hi - lo))
}

// waitSleepers waits until n threads sleep on w (false after 10 s).
func waitSleepers(w *wakeup, n int32) bool {
	for end := time.Now().Add(10 * time.Second); w.sleepers.Load() != n; {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(100 * time.Microsecond)
	}
	return true
}

// TestPoolWakesSleepers issues ops while every worker sleeps (past its
// spin), on both sleep paths: each op must wake a worker that runs some of
// its chunks, and the caller must be woken from its own sleep when a
// worker finishes the last chunk late.
func TestPoolWakesSleepers(t *testing.T) {
	for _, portable := range []bool{false, true} {
		for _, threads := range []int{2, 3} {
			p := newPoolWith(threads, !portable)
			for op := 0; op < 20; op++ {
				if !waitSleepers(&p.work, int32(threads-1)) {
					t.Fatalf("portable=%v threads=%d: workers never slept", portable, threads)
				}
				var c needsWorkerTask
				p.run(64, 1, 0, 0, &c)
				if c.timeout.Load() || c.units.Load() != 64 {
					t.Errorf("portable=%v threads=%d op %d: woke a worker %v, %d units run", portable, threads, op, !c.timeout.Load(), c.units.Load())
				}
				// the caller sleeps on fin while a worker finishes late
				var s slowTask
				p.run(2*threads, 1, 0, 0, &s)
				if s.units.Load() != int64(2*threads) {
					t.Errorf("portable=%v threads=%d op %d: slow op ran %d units", portable, threads, op, s.units.Load())
				}
			}
			p.close()
		}
	}
}

// slowTask sleeps 300 µs per chunk on the workers (longer than the
// caller's spin in join), so that the caller sleeps on p.fin.
type slowTask struct{ units atomic.Int64 }

func (s *slowTask) run(lo, hi, w int) {
	if w != 0 {
		time.Sleep(300 * time.Microsecond)
	}
	s.units.Add(int64(hi - lo))
}

// TestPoolCloseLeaks checks that close returns only once every worker has
// returned, whether the workers sleep, spin or have never run an op, on
// both sleep paths.
func TestPoolCloseLeaks(t *testing.T) {
	for end := time.Now().Add(time.Second); poolWorkers() != 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond) // closed pools of earlier tests: Done runs just before return
	}
	before := poolWorkers()
	for _, portable := range []bool{false, true} {
		for _, state := range []string{"fresh", "spinning", "sleeping"} {
			p := newPoolWith(4, !portable)
			switch state {
			case "spinning":
				var c countTask
				p.run(4096, 4, 0, 0, &c)
			case "sleeping":
				var c countTask
				p.run(4096, 4, 0, 0, &c)
				if !waitSleepers(&p.work, 3) {
					t.Fatalf("portable=%v: workers never slept", portable)
				}
			}
			p.close()
			// close waited for every worker's Done, which runs a few
			// instructions before the goroutine ends
			n := poolWorkers()
			for end := time.Now().Add(time.Second); n != before && time.Now().Before(end); n = poolWorkers() {
				time.Sleep(time.Millisecond)
			}
			if n != before {
				t.Errorf("portable=%v %s: %d pool workers after close, %d before", portable, state, n, before)
			}
		}
	}
}

// TestPoolCut checks the chunk bounds: they cover [0, total) in order, are
// multiples of align (but the last), about four equal chunks per thread
// for parallel (tail 0), and for the guided cuts (tail 16: parallelGuided,
// 64: parallelGuidedFine) sizes that never grow (but the remainder at the
// end), start at half an even share and end small, at most tail chunks
// per thread.
func TestPoolCut(t *testing.T) {
	cases := []struct {
		threads, total, align, tail int
		first, last, chunks         int // first chunk, most units in the last, chunks; 0: not checked
	}{
		{2, 2048, 4, 0, 256, 256, 8},
		{2, 32000, 4, 0, 4000, 4000, 8},
		{2, 2048, 4, guidedTail, 512, 64, 0},
		{2, 3072, 4, guidedTail, 768, 0, 0},
		{2, 32000, 4, guidedTail, 8000, 0, 0},
		{2, 8192, 4, guidedTail, 2048, 256, 0},
		{3, 1000, 4, guidedTail, 168, 0, 0},
		{2, 9, 4, guidedTail, 4, 1, 3},
		{2, 5, 1, 0, 1, 1, 5},
		{16, 100000, 16, guidedTail, 3136, 0, 0},
		// the fine tails: the F16/BF16 panels' ops at 16 sequences of the
		// 1B shape (q/k/v 3072 rows, Wo and ffn_down 2048, gate/up 16384,
		// the LM head 32000; groups of 16 rows)
		{2, 2048, 16, fineTail, 512, 16, 0},
		{2, 3072, 16, fineTail, 768, 32, 0},
		{2, 16384, 16, fineTail, 4096, 128, 0},
		{2, 32000, 16, fineTail, 8000, 256, 0},
		{2, 9, 4, fineTail, 4, 1, 3},
		{3, 1000, 4, fineTail, 168, 8, 0},
		{16, 100000, 16, fineTail, 3136, 0, 0},
		{1, 100, 1, fineTail, 50, 2, 0},
		{2, 100000, 1, 1000, 25000, 782, 0}, // tail beyond maxTail: maxTail
	}
	for _, c := range cases {
		p := &pool{n: c.threads, bounds: make([]int, maxTail*c.threads+2)}
		n := p.cut(c.total, c.align, c.tail)
		b := p.bounds[:n+1]
		limit := 16 * c.threads
		if c.tail > 0 {
			limit = min(c.tail, maxTail) * c.threads
		}
		if b[0] != 0 || b[n] != c.total || n > limit || (c.chunks > 0 && n != c.chunks) {
			t.Errorf("%+v: %d chunks (at most %d), bounds %v", c, n, limit, b)
			continue
		}
		for i := 0; i < n; i++ {
			size := b[i+1] - b[i]
			if size <= 0 || (i < n-1 && b[i+1]%c.align != 0) {
				t.Errorf("%+v: chunk %d is [%d, %d)", c, i, b[i], b[i+1])
			}
			if c.tail > 0 && i > 0 && i < n-1 && size > b[i]-b[i-1] {
				t.Errorf("%+v: chunk %d (%d units) larger than chunk %d", c, i, size, i-1)
			}
		}
		if c.first > 0 && b[1]-b[0] != c.first {
			t.Errorf("%+v: first chunk %d units, want %d", c, b[1]-b[0], c.first)
		}
		if c.last > 0 && b[n]-b[n-1] > c.last {
			t.Errorf("%+v: last chunk %d units, want ≤ %d", c, b[n]-b[n-1], c.last)
		}
	}
}

// BenchmarkPoolDispatch times one parallel op whose chunks do nothing:
// the per-MatMul cost of handing work to the second thread and joining
// it (a decode step of the 1B shape issues 113 MatMuls).
func BenchmarkPoolDispatch(b *testing.B) {
	p := newPool(2, false)
	defer p.close()
	var c countTask
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.parallel(2048, 4, 0, &c)
	}
}

// poolWorkers counts the goroutines running a pool's worker.
func poolWorkers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "cpu.(*pool).worker(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// BenchmarkPoolWake times how long an op issued while the workers sleep
// waits for a worker to start one of its chunks (the caller's chunks spin
// until one has): the wake-up latency per op, through the futex and
// through the portable sync.Cond (a Go scheduler wake), at GOMAXPROCS 2 (the
// runner benchmark's) and 3 (the engine's: compute threads + 1).
func BenchmarkPoolWake(b *testing.B) {
	for _, procs := range []int{2, 3} {
		for _, portable := range []bool{false, true} {
			name := "futex"
			if portable {
				name = "cond"
			}
			b.Run(name+"/procs="+strconv.Itoa(procs), func(b *testing.B) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				p := newPoolWith(2, !portable)
				defer p.close()
				var total time.Duration
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					if !waitSleepers(&p.work, 1) {
						b.Fatal("the worker never slept")
					}
					b.StartTimer()
					var c needsWorkerTask
					t0 := time.Now()
					p.run(2, 1, 0, 0, &c)
					total += time.Since(t0)
				}
				b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/wake")
			})
		}
	}
}

// TestPoolSleepPath checks newPool's choice: the futex only when asked
// for and where GOMAXPROCS leaves a processor beyond the pool's threads.
func TestPoolSleepPath(t *testing.T) {
	cases := []struct {
		procs, threads int
		ask, futex     bool
	}{
		{2, 2, true, false},
		{3, 2, true, haveFutex},
		{2, 1, true, haveFutex},
		{4, 0, true, false}, // 0: GOMAXPROCS threads
		{3, 2, false, false},
	}
	for _, c := range cases {
		func() {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(c.procs))
			p := newPool(c.threads, c.ask)
			defer p.close()
			if p.work.futex != c.futex || p.fin.futex != c.futex {
				t.Errorf("GOMAXPROCS %d, %d threads, asked %v: futex %v/%v, want %v", c.procs, c.threads, c.ask, p.work.futex, p.fin.futex, c.futex)
			}
		}()
	}
}
