package procs

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestPolicy walks the state machine through event sequences: widen at a
// start at an idle server, narrow only once Hold has passed since the last
// such start and at least Busy requests are in flight, never change on a
// check before that.
func TestPolicy(t *testing.T) {
	p := Policy{Narrow: 1, Wide: 2, Hold: time.Second, Busy: 32}
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type ev struct {
		start   bool // StartIdle, else Check
		ms      int
		n       int // in flight at a check
		changed bool
		procs   int
		again   time.Duration
	}
	tests := []struct {
		name   string
		policy Policy
		evs    []ev
	}{
		{"narrow stays narrow on checks", p, []ev{
			{false, 0, 0, false, 1, 0}, {false, 5000, 100, false, 1, 0},
		}},
		{"start widens, narrows after hold when busy", p, []ev{
			{true, 0, 0, true, 2, 0},
			{false, 400, 256, false, 2, 600 * time.Millisecond},
			{false, 999, 256, false, 2, time.Millisecond},
			{false, 1000, 256, true, 1, 0},
			{false, 3000, 256, false, 1, 0},
		}},
		{"few in flight: stays wide, checks once per hold", p, []ev{
			{true, 0, 0, true, 2, 0},
			{false, 1000, 16, false, 2, time.Second},
			{false, 2000, 31, false, 2, time.Second},
			{false, 3000, 0, false, 2, time.Second},
			{false, 4000, 32, true, 1, 0},
		}},
		{"a second start extends the hold, once", p, []ev{
			{true, 0, 0, true, 2, 0},
			{true, 800, 0, false, 2, 0},
			{false, 1000, 64, false, 2, 800 * time.Millisecond},
			{false, 1800, 64, true, 1, 0},
			{true, 1801, 0, true, 2, 0},
			{false, 2801, 64, true, 1, 0},
		}},
		{"late check narrows at once", p, []ev{
			{true, 0, 0, true, 2, 0},
			{false, 60000, 40, true, 1, 0},
		}},
		{"one core: never a change", Policy{Narrow: 1, Wide: 1, Hold: time.Second, Busy: 1}, []ev{
			{true, 0, 0, false, 1, 0},
			{false, 500, 1, false, 1, 500 * time.Millisecond},
			{false, 1000, 1, false, 1, 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st State
			for i, e := range tc.evs {
				var changed bool
				var again time.Duration
				if e.start {
					changed = tc.policy.StartIdle(&st, at(e.ms))
				} else {
					changed, again = tc.policy.Check(&st, at(e.ms), e.n)
				}
				if changed != e.changed || tc.policy.Procs(st) != e.procs || again != e.again {
					t.Fatalf("event %d (%+v): changed %v procs %d again %v", i, e, changed, tc.policy.Procs(st), again)
				}
			}
		})
	}
}

// fakeRuntime records the controller's GOMAXPROCS calls and runs its timer
// by hand.
type fakeRuntime struct {
	now   time.Time
	sets  []int
	timer func()
	due   time.Time
}

func (f *fakeRuntime) controller(p Policy) *Controller {
	return newController(p, func(n int) { f.sets = append(f.sets, n) }, func() time.Time { return f.now },
		func(d time.Duration, fn func()) func() bool {
			f.timer, f.due = fn, f.now.Add(d)
			return func() bool { f.timer = nil; return true }
		})
}

// advance moves the clock and fires the timer when due.
func (f *fakeRuntime) advance(d time.Duration) {
	f.now = f.now.Add(d)
	for f.timer != nil && !f.now.Before(f.due) {
		fn := f.timer
		f.timer = nil
		fn()
	}
}

// TestController: starts wide, stays wide with few requests in flight,
// narrows after the hold with Busy in flight, widens at a request that
// starts at an idle server but not at one that joins running ones (a stream
// of requests keeps it narrow: no change per request or step), and Close
// leaves it wide with no timer.
func TestController(t *testing.T) {
	f := &fakeRuntime{now: time.Unix(5000, 0)}
	c := f.controller(Policy{Narrow: 1, Wide: 2, Hold: time.Second, Busy: 2})
	check := func(what string, sets ...int) {
		t.Helper()
		if len(f.sets) != len(sets) {
			t.Fatalf("%s: GOMAXPROCS calls %v, want %v", what, f.sets, sets)
		}
		for i := range sets {
			if f.sets[i] != sets[i] {
				t.Fatalf("%s: GOMAXPROCS calls %v, want %v", what, f.sets, sets)
			}
		}
	}
	check("start", 2)
	f.advance(5 * time.Second)
	check("idle", 2)
	c.Begin() // at an idle server: already wide
	f.advance(5 * time.Second)
	check("one in flight", 2)
	c.Begin()
	f.advance(999 * time.Millisecond)
	check("busy, before the check", 2)
	f.advance(time.Millisecond)
	check("busy after hold", 2, 1)
	if c.Procs() != 1 || f.timer != nil {
		t.Fatalf("narrow: procs %d, timer armed %v", c.Procs(), f.timer != nil)
	}
	for range 1000 { // requests joining running ones, over 10 s
		c.Begin()
		f.advance(10 * time.Millisecond)
		c.End()
	}
	c.End()
	f.advance(time.Minute)
	check("stream of requests, then one left", 2, 1)
	c.End()
	c.Begin()
	check("idle start", 2, 1, 2)
	c.Close()
	if f.timer != nil {
		t.Fatal("timer still armed after Close")
	}
	f.advance(time.Hour)
	c.End()
	c.Begin()
	check("after close", 2, 1, 2)

	var nilc *Controller
	nilc.Begin()
	nilc.End()
	nilc.Close()
}

// TestControllerCloseNarrow: Close restores the wide GOMAXPROCS.
func TestControllerCloseNarrow(t *testing.T) {
	f := &fakeRuntime{now: time.Unix(5000, 0)}
	c := f.controller(Policy{Narrow: 0, Wide: 4, Busy: 1})
	if p := c.Policy(); p.Narrow != 1 || p.Wide != 4 || p.Hold != DefaultHold || p.Busy != 1 {
		t.Fatalf("policy %+v", p)
	}
	if p := (&fakeRuntime{}).controller(Policy{}).Policy(); p.Busy != DefaultBusy {
		t.Fatalf("default policy %+v", p)
	}
	c.Begin()
	f.advance(DefaultHold)
	c.Close()
	if want := []int{4, 1, 4}; len(f.sets) != 3 || f.sets[2] != 4 {
		t.Fatalf("GOMAXPROCS calls %v, want %v", f.sets, want)
	}
}

// TestControllerRuntime runs the real controller concurrently (for -race)
// and checks that GOMAXPROCS goes back to wide on Close.
func TestControllerRuntime(t *testing.T) {
	wide := runtimeProcs()
	c := New(Policy{Narrow: 1, Wide: wide, Hold: 5 * time.Millisecond, Busy: 1})
	c.Begin() // keeps one request in flight
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				c.Begin()
				time.Sleep(50 * time.Microsecond)
				c.End()
			}
		})
	}
	wg.Wait()
	time.Sleep(20 * time.Millisecond)
	if got := c.Procs(); got != 1 {
		t.Errorf("after the hold with one in flight: procs %d, want 1", got)
	}
	c.End()
	c.Close()
	if got := runtimeProcs(); got != wide {
		t.Errorf("after Close: GOMAXPROCS %d, want %d", got, wide)
	}
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// TestHandler: the middleware widens when a request starts with none in
// flight, before the handler runs (so before the request's body is parsed
// and its prompt tokenized), not for requests that join running ones, and
// a nil controller returns the handler itself.
func TestHandler(t *testing.T) {
	f := &fakeRuntime{now: time.Unix(5000, 0)}
	c := f.controller(Policy{Narrow: 1, Wide: 2, Hold: time.Second, Busy: 1})
	c.Begin()
	f.advance(time.Second) // narrow
	c.End()
	var seen []int
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, c.Procs())
		if r.URL.Path == "/outer" {
			// A request that arrives while this one runs.
			c.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { seen = append(seen, c.Procs()) })).
				ServeHTTP(w, httptest.NewRequest("GET", "/inner", nil))
		}
	})
	h := c.Handler(inner)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/outer", nil))
	if len(seen) != 2 || seen[0] != 2 || seen[1] != 2 {
		t.Fatalf("procs seen by the handlers %v, want [2 2]", seen)
	}
	if want := []int{2, 1, 2}; len(f.sets) != len(want) || f.sets[2] != 2 {
		t.Fatalf("GOMAXPROCS calls %v, want %v", f.sets, want)
	}
	if c.active.Load() != 0 {
		t.Fatalf("in flight after both ended: %d", c.active.Load())
	}
	var nilc *Controller
	if got := nilc.Handler(inner); got == nil {
		t.Fatal("nil controller: no handler")
	}
}
