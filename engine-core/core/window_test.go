package core

import (
	"testing"
	"time"

	"github.com/sluice-llm/sluice/engine-core/kvcache"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/engine-core/simexec"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/ipc/zmqtransport"
)

// fakeTimer replaces time.After for the arrival window: the test decides
// when the window ends, so no assertion depends on how fast the loop runs.
type fakeTimer struct {
	calls chan time.Duration  // one entry per window opened
	fire  chan chan time.Time // the channel of each window, in order
}

func newFakeTimer() *fakeTimer {
	return &fakeTimer{calls: make(chan time.Duration, 64), fire: make(chan chan time.Time, 64)}
}

func (f *fakeTimer) after(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	f.fire <- ch
	f.calls <- d
	return ch
}

// startWindow runs a loop over the sim executor with the arrival window on
// (tests pass IdleWait = one hour: only the fake timer or a full step ends
// it).
func startWindow(t *testing.T, maxSeqs int, idle time.Duration, ft *fakeTimer) *setup {
	return startWindowStep(t, maxSeqs, idle, ft, 100*time.Microsecond)
}

// startWindowStep is startWindow with the simulated step time.
func startWindowStep(t *testing.T, maxSeqs int, idle time.Duration, ft *fakeTimer, step time.Duration) *setup {
	t.Helper()
	pool := kvcache.New(512, 16)
	s := sched.New(sched.Config{MaxNumSeqs: maxSeqs, MaxNumBatchedTokens: 512, MaxModelLen: 1024, EOSTokenIDs: []int32{2}}, pool)
	ex, err := simexec.New(simexec.Config{VocabSize: 1000, TokenMin: 10, TokenMax: 999, EOSTokenIDs: []int32{2}, StepTime: step})
	if err != nil {
		t.Fatal(err)
	}
	tr := newFake()
	opts := Options{EngineID: "e1", Sched: s, Exec: ex, Transport: tr, DrainTimeout: time.Second, IdleWait: idle}
	if ft != nil {
		opts.After = ft.after
	}
	return run(t, opts)
}

// firstSteps maps each request of frontend fe to the step of its first
// output.
func (f *fakeTransport) firstSteps(fe string) map[string]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]uint64{}
	for _, batch := range f.outs[fe] {
		for _, o := range batch.Outputs {
			if _, ok := m[o.RequestID]; !ok {
				m[o.RequestID] = batch.Step
			}
		}
	}
	return m
}

// waitOpened waits until the loop opened a window.
func (ft *fakeTimer) waitOpened(t *testing.T) {
	t.Helper()
	select {
	case <-ft.calls:
	case <-time.After(10 * time.Second):
		t.Fatal("no arrival window opened")
	}
}

// sameStep fails unless every one of ids had its first output in one step.
func sameStep(t *testing.T, st *setup, ids []string) {
	t.Helper()
	st.tr.waitFor(t, "first tokens", func() bool { return len(st.tr.firstSteps("fa")) >= len(ids) })
	steps := st.tr.firstSteps("fa")
	for _, id := range ids {
		if steps[id] != steps[ids[0]] {
			t.Fatalf("first steps %v: %s and %s started apart", steps, ids[0], id)
		}
	}
}

// TestIdleWindowCoalesces: requests that arrive one by one at an idle
// engine, each handled before the next is sent, share the first step when
// the window is on — the loop plans nothing until the window ends.
func TestIdleWindowCoalesces(t *testing.T) {
	ft := newFakeTimer()
	st := startWindow(t, 64, time.Hour, ft)
	ids := []string{"r0", "r1", "r2", "r3", "r4"}
	st.tr.in <- add("fa", ids[0], 20, 3)
	ft.waitOpened(t)
	for i, id := range ids[1:] {
		st.tr.in <- add("fa", id, 20, 3)
		// The utility call is answered after the ADD is handled: nothing
		// was scheduled yet.
		if s := st.tr.stats(t); s.Running != 0 || int(s.Waiting) != i+2 {
			t.Fatalf("after %s: running %d waiting %d, want 0 and %d", id, s.Running, s.Waiting, i+2)
		}
	}
	(<-ft.fire) <- time.Now()
	sameStep(t, st, ids)
	if len(ft.calls) != 0 {
		t.Fatalf("%d more windows opened", len(ft.calls))
	}
}

// TestIdleWindowEndsWhenFull: the window ends without its timer once the
// waiting requests reach max-num-seqs.
func TestIdleWindowEndsWhenFull(t *testing.T) {
	ft := newFakeTimer()
	st := startWindow(t, 4, time.Hour, ft)
	ids := []string{"r0", "r1", "r2", "r3"}
	st.tr.in <- add("fa", ids[0], 20, 3)
	ft.waitOpened(t)
	for _, id := range ids[1:] {
		st.tr.in <- add("fa", id, 20, 3)
	}
	sameStep(t, st, ids) // the timer never fires
	st.tr.waitFor(t, "requests done", func() bool {
		k := 0
		for _, v := range st.tr.view("fa") {
			if v.finish == ipc.FinishLength {
				k++
			}
		}
		return k == len(ids)
	})
}

// TestIdleWindowNotWhileRunning: a request that arrives while another runs
// joins the next step at once; only the idle engine opens a window.
func TestIdleWindowNotWhileRunning(t *testing.T) {
	ft := newFakeTimer()
	// long decodes for about 2 s (1000 steps of 2 ms), far longer than
	// late needs to arrive and finish.
	st := startWindowStep(t, 64, time.Hour, ft, 2*time.Millisecond)
	st.tr.in <- add("fa", "long", 20, 1000)
	ft.waitOpened(t)
	(<-ft.fire) <- time.Now()
	st.tr.waitFor(t, "long's first token", func() bool { return len(st.tr.firstSteps("fa")) == 1 })
	st.tr.in <- add("fa", "late", 20, 2)
	st.tr.waitFor(t, "late's tokens", func() bool {
		v := st.tr.view("fa")["late"]
		return v != nil && v.finish == ipc.FinishLength
	})
	if len(ft.calls) != 0 {
		t.Fatalf("a window opened while a request ran")
	}
	if s := st.firstStepsOf("late", "long"); s[0] <= s[1] {
		t.Fatalf("late started in step %d, long in %d", s[0], s[1])
	}
}

func (st *setup) firstStepsOf(ids ...string) []uint64 {
	m := st.tr.firstSteps("fa")
	out := make([]uint64, len(ids))
	for i, id := range ids {
		out[i] = m[id]
	}
	return out
}

// TestIdleWindowAbortEmpties: aborting the only request inside the window
// ends the window; the engine computes nothing and is idle again, and a
// new request opens a new window.
func TestIdleWindowAbortEmpties(t *testing.T) {
	ft := newFakeTimer()
	st := startWindow(t, 64, time.Hour, ft)
	st.tr.in <- add("fa", "gone", 20, 3)
	ft.waitOpened(t)
	st.tr.in <- zmqtransport.Inbound{Frontend: "fa", Kind: ipc.KindAbort, Abort: &ipc.Abort{RequestIDs: []string{"gone"}}}
	st.tr.waitFor(t, "abort applied", func() bool {
		s := st.tr.stats(t)
		return s.Running == 0 && s.Waiting == 0
	})
	st.tr.in <- add("fa", "next", 20, 3)
	ft.waitOpened(t)
	<-ft.fire // the first window's channel, never fired
	(<-ft.fire) <- time.Now()
	st.tr.waitFor(t, "next done", func() bool {
		v := st.tr.view("fa")["next"]
		return v != nil && v.finish == ipc.FinishLength
	})
	if _, ok := st.tr.firstSteps("fa")["gone"]; ok {
		t.Fatal("the aborted request produced output")
	}
}

// TestIdleWindowAbortThenArrival: a request queued right behind the abort
// that empties the window is received by the loop's non-blocking drain, not
// its blocking receive; the engine has nothing to compute, so the request
// opens a new window all the same (it once started a step at once, which
// also made TestIdleWindowAbortEmpties flaky).
func TestIdleWindowAbortThenArrival(t *testing.T) {
	ft := newFakeTimer()
	st := startWindow(t, 64, time.Hour, ft)
	st.tr.in <- add("fa", "gone", 20, 3)
	ft.waitOpened(t)
	st.tr.in <- zmqtransport.Inbound{Frontend: "fa", Kind: ipc.KindAbort, Abort: &ipc.Abort{RequestIDs: []string{"gone"}}}
	st.tr.in <- add("fa", "next", 20, 3)
	ft.waitOpened(t)
	<-ft.fire // the first window's channel, never fired
	(<-ft.fire) <- time.Now()
	st.tr.waitFor(t, "next done", func() bool {
		v := st.tr.view("fa")["next"]
		return v != nil && v.finish == ipc.FinishLength
	})
	if _, ok := st.tr.firstSteps("fa")["gone"]; ok {
		t.Fatal("the aborted request produced output")
	}
}

// TestNoIdleWindow: with IdleWait 0 the loop never opens a window, and the
// first request of a staggered pair runs alone (the behaviour the window
// exists to avoid).
func TestNoIdleWindow(t *testing.T) {
	ft := newFakeTimer()
	st := startWindow(t, 64, 0, ft)
	st.tr.in <- add("fa", "a", 20, 50)
	st.tr.waitFor(t, "a's first token", func() bool { return len(st.tr.firstSteps("fa")) == 1 })
	st.tr.in <- add("fa", "b", 20, 2)
	st.tr.waitFor(t, "b's first token", func() bool { return len(st.tr.firstSteps("fa")) == 2 })
	if s := st.firstStepsOf("a", "b"); s[0] == s[1] {
		t.Fatalf("a and b both started in step %d", s[0])
	}
	if len(ft.calls) != 0 {
		t.Fatal("a window opened with IdleWait 0")
	}
}

// TestNegativeIdleWait: New refuses it.
func TestNegativeIdleWait(t *testing.T) {
	ex, err := simexec.New(simexec.Config{VocabSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Sched: sched.New(sched.Config{}, kvcache.New(8, 16)), Exec: ex, Transport: newFake(), IdleWait: -time.Millisecond}); err == nil {
		t.Fatal("negative IdleWait accepted")
	}
}
