package cpu

import (
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/kernels"
)

func TestGreedyMakespan(t *testing.T) {
	for _, c := range []struct {
		name    string
		cost    []int64
		threads int
		want    int64
	}{
		{"none", nil, 2, 0},
		{"equal", []int64{3, 3, 3, 3}, 2, 6},
		{"big first", []int64{5, 1, 1, 1}, 2, 5},
		{"big last", []int64{1, 1, 1, 5}, 2, 6}, // the tie goes to thread 0, the 5 to thread 1
		{"odd count", []int64{2, 2, 2}, 2, 4},
		{"one thread", []int64{1, 2, 3}, 1, 6},
		{"more threads than chunks", []int64{4, 1}, 4, 4},
		{"three threads", []int64{3, 3, 3, 1, 1, 1}, 3, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			finish := make([]int64, c.threads)
			finish[0] = 99 // scratch: cleared by the call
			if got := greedyMakespan(c.cost, finish); got != c.want {
				t.Errorf("greedyMakespan(%v, %d threads) = %d, want %d", c.cost, c.threads, got, c.want)
			}
		})
	}
}

func TestOpStatsImbalance(t *testing.T) {
	for _, c := range []struct {
		s    OpStats
		want float64
	}{
		{OpStats{}, 0},
		{OpStats{ChunkCPU: 100, Makespan: 50, Threads: 2}, 0},
		{OpStats{ChunkCPU: 100, Makespan: 55, Threads: 2}, 0.1},
		{OpStats{ChunkCPU: 100, Makespan: 100, Threads: 1}, 0},
	} {
		if got := c.s.Imbalance(); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%+v.Imbalance() = %v, want %v", c.s, got, c.want)
		}
	}
}

// TestOpStats checks that recording counts the parallel ops, bounds their
// makespan by their CPU, leaves the results unchanged bit for bit, stops
// when turned off and leaves the ops allocating nothing once off. (While
// recording, a locked thread that blocks can make the Go runtime start
// another thread, an allocation now and then: measured under -race.)
func TestOpStats(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	const n, rows, cols = 16, 512, 1024
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16, kernels.Q8_0} {
		t.Run(dt.String(), func(t *testing.T) {
			var w kernels.Tensor
			var err error
			if dt == kernels.F32 {
				w = &kernels.Host{R: rows, C: cols, F: randF(r, rows*cols)}
			} else {
				data := randBlocks(r, dt, rows, cols)
				if dt == kernels.F16 {
					sanitizeHalves(dt, data)
				}
				w, err = kernels.NewHostWeight(dt, rows, cols, data)
				if err != nil {
					t.Fatal(err)
				}
			}
			be := New(Options{Threads: 2, QuantizeActivations: true})
			defer be.Close()
			x := &kernels.Host{R: n, C: cols, F: randF(r, n*cols)}
			want, got := be.Alloc(n, rows), be.Alloc(n, rows)
			be.MatMul(want, x, w, n)

			be.RecordOps(true)
			const ops = 5
			for i := 0; i < ops; i++ {
				be.MatMul(got, x, w, n)
			}
			st := be.OpStats()
			if st.Ops != ops || st.Threads != 2 {
				t.Fatalf("OpStats after %d MatMuls = %+v, want %d ops on 2 threads", ops, st, ops)
			}
			if runtime.GOOS == "linux" {
				if st.ChunkCPU <= 0 || st.Makespan < st.ChunkCPU/2 || st.Makespan > st.ChunkCPU {
					t.Errorf("OpStats %+v: want 0 < ChunkCPU/2 ≤ Makespan ≤ ChunkCPU", st)
				}
				if im := st.Imbalance(); im < 0 || im > 1 {
					t.Errorf("Imbalance() = %v, want in [0, 1]", im)
				}
			}
			for i, v := range got.(*kernels.Host).F {
				if math.Float32bits(v) != math.Float32bits(want.(*kernels.Host).F[i]) {
					t.Fatalf("output %d = %v while recording, %v without", i, v, want.(*kernels.Host).F[i])
				}
			}
			be.RecordOps(false)
			before := be.OpStats().Ops
			be.MatMul(got, x, w, n)
			if after := be.OpStats().Ops; after != before {
				t.Errorf("ops recorded after RecordOps(false): %d → %d", before, after)
			}
			// off again (as when serving), the pool's threads locked while
			// recording add nothing per op
			if a := testing.AllocsPerRun(20, func() { be.MatMul(got, x, w, n) }); a != 0 {
				t.Errorf("MatMul after recording allocates %v times per op, want 0", a)
			}
			be.RecordOps(true)
			if st := be.OpStats(); st.Ops != 0 || st.ChunkCPU != 0 || st.Makespan != 0 || st.JoinCPU != 0 {
				t.Errorf("RecordOps(true) did not reset: %+v", st)
			}
		})
	}
}

// TestOpStatsWaits checks the pool's waits that recording adds: ops with
// pauses between them longer than the workers' spin make the worker
// sleep (Sleeps), its time between chunks is counted (AwaitCPU, Linux),
// the times are never negative and RecordOps(true) resets them.
func TestOpStatsWaits(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 6))
	const n, rows, cols = 16, 4096, 1024 // ≈ 1 ms per op: the worker takes chunks
	w := &kernels.Host{R: rows, C: cols, F: randF(r, rows*cols)}
	be := New(Options{Threads: 2})
	defer be.Close()
	x := &kernels.Host{R: n, C: cols, F: randF(r, n*cols)}
	out := be.Alloc(n, rows)
	be.RecordOps(true)
	const ops = 8
	for i := 0; i < ops; i++ {
		be.MatMul(out, x, w, n)
		time.Sleep(4 * workerSpin) // the worker spins out and sleeps
	}
	st := be.OpStats()
	be.RecordOps(false)
	if st.Ops != ops {
		t.Fatalf("OpStats after %d MatMuls = %+v", ops, st)
	}
	if st.Sleeps == 0 || st.Sleeps > 2*ops {
		t.Errorf("Sleeps = %d after %d ops each followed by a pause of 4 spins, want 1…%d", st.Sleeps, ops, 2*ops)
	}
	if st.AwaitCPU < 0 || st.JoinCPU < 0 {
		t.Errorf("negative wait: %+v", st)
	}
	if runtime.GOOS == "linux" && st.AwaitCPU == 0 {
		t.Errorf("AwaitCPU = 0 after %d ops with the worker spinning between them: %+v", ops, st)
	}
	be.RecordOps(true)
	if st := be.OpStats(); st.AwaitCPU != 0 || st.JoinCPU != 0 || st.Sleeps != 0 {
		t.Errorf("RecordOps(true) did not reset the waits: %+v", st)
	}
	be.RecordOps(false)
}

// TestOpStatsSerial checks the caller's serial gaps: with the caller
// locked to its thread, a busy loop between two parallel ops counts as
// one gap (at least the loop's CPU on Linux), attributed to the op that
// ended it, and RecordOps(true) resets it.
func TestOpStatsSerial(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := rand.New(rand.NewPCG(7, 9))
	const n, cols = 16, 2048
	be := New(Options{Threads: 2})
	defer be.Close()
	x := &kernels.Host{R: n, C: cols, F: randF(r, n*cols)}
	w := &kernels.Host{R: 1, C: cols, F: randF(r, cols)}
	out := be.Alloc(n, cols)
	be.RecordOps(true)
	be.RMSNorm(out, x, w, n, 1e-5) // the first op: no gap before it
	spin := 2 * time.Millisecond
	c0 := threadCPU()
	for t0 := time.Now(); time.Since(t0) < spin; {
	}
	busy := time.Duration(threadCPU() - c0)
	be.RMSNorm(out, x, w, n, 1e-5)
	st, sites := be.OpStats(), be.SerialSites()
	be.RecordOps(false)
	if st.SerialGaps != 1 || len(sites) != 1 || sites[0].Count != 1 {
		t.Fatalf("after two ops: %d gaps, sites %+v; want 1 gap at one site", st.SerialGaps, sites)
	}
	// (this test is in the package, so the site is its caller's)
	if !strings.HasSuffix(sites[0].Site, " RMSNorm") {
		t.Errorf("site %q, want the caller of RMSNorm", sites[0].Site)
	}
	if st.SerialWall < spin {
		t.Errorf("SerialWall %v < the %v between the ops", st.SerialWall, spin)
	}
	if runtime.GOOS == "linux" && (st.SerialCPU < busy || st.SerialCPU > st.SerialWall+time.Millisecond) {
		t.Errorf("SerialCPU %v, want between the loop's CPU %v and SerialWall %v (+1 ms: two clocks)", st.SerialCPU, busy, st.SerialWall)
	}
	be.RecordOps(true)
	if st := be.OpStats(); st.SerialGaps != 0 || st.SerialCPU != 0 || len(be.SerialSites()) != 0 {
		t.Errorf("RecordOps(true) did not reset the gaps: %+v", st)
	}
	be.RecordOps(false)
}
