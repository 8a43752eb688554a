// Package procs sizes a lone frontend's GOMAXPROCS to what it is doing:
// one P while it streams, all of the process's cores while it takes in a
// burst of requests at an idle server.
//
// Why: a streaming step is a chain of goroutine hand-offs (the engine
// link's reader, the I/O loop, the output goroutine, the handlers at
// stream ends). With an idle second P every hand-off wakes that P's thread,
// which steals the work or spins and sleeps again, and the streams' state
// moves between the cores' caches: at 256 streams one P spends 0.7–1.8 µs
// less CPU per streamed token (docs/BENCHMARKS.md, issue 23 item 6). But a
// burst of requests sent together to an idle engine must reach it inside
// the engine's arrival window (--scheduler-idle-wait, 10 ms on CPU), and on
// a contended host one thread parsing and tokenizing them one after the
// other missed it (2 of 6 runs: the engine then ran a long prefill step for
// the first part before the rest joined). Those are the only requests whose
// intake speed decides a step's composition: while anything runs, the
// engine plans each step with whatever has arrived, without a window.
//
// So the controller widens to all cores when a request starts at a server
// with none in flight (the start of a burst at an idle engine: widened as
// soon as the first request's head is read, so the rest of the burst is
// parsed and tokenized on every core), and narrows to one P only once no
// such start has happened for Hold (1 s by default: far longer than the
// arrival window) and at least Busy requests (32 by default) are in flight:
// the hand-offs' cost is per streamed token and matters with many streams,
// while with few the frontend stays as Go would run it, so that an idle or
// lightly used server is already wide when a burst comes. While narrow,
// requests that join running ones change nothing; GOMAXPROCS changes at
// most twice per idle period, never per step. Nothing runs per request but
// an atomic add at its start and end (Handler); a timer runs once per Hold
// while wide.
//
// Policy is the pure state machine (tested on its own); Controller applies
// it to the Go runtime.
package procs

import (
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultBusy is Policy.Busy's default: the requests in flight from which
// one P pays (at 64 streams one P cost 1.4–1.8 µs less CPU per token than
// two on 2 cores, docs/BENCHMARKS.md "i23tok4"; at 16 the frontend's CPU is
// small beside the engine's).
const DefaultBusy = 32

// DefaultHold is Policy.Hold's default: how long the controller stays
// wide after the last request that started at an idle server.
const DefaultHold = time.Second

// Policy is the controller's decision rule, without clock or runtime: the
// caller reports events with the time they happened and applies the
// GOMAXPROCS it returns.
type Policy struct {
	// Narrow is the GOMAXPROCS while busy (1).
	Narrow int
	// Wide is the GOMAXPROCS while a burst is taken in (the process's
	// cores).
	Wide int
	// Hold is how long to stay wide after the last request that started
	// at an idle server.
	Hold time.Duration
	// Busy is the requests in flight from which the policy narrows.
	Busy int
}

// State is where the policy stands. The zero value is narrow.
type State struct {
	// Wide tells whether the wide GOMAXPROCS applies.
	Wide bool
	// Last is when the last request started at an idle server (or the
	// controller started).
	Last time.Time
}

// Procs is the GOMAXPROCS st stands for.
func (p Policy) Procs(st State) int {
	if st.Wide {
		return p.Wide
	}
	return p.Narrow
}

// StartIdle records a request that started while none was in flight, at
// now: the policy goes wide (or stays wide, for Hold from now). It reports
// whether GOMAXPROCS must change.
func (p Policy) StartIdle(st *State, now time.Time) (changed bool) {
	st.Last = now
	changed = !st.Wide && p.Wide != p.Narrow
	st.Wide = true
	return changed
}

// Check is the timer's visit at now with inFlight requests in flight: it
// narrows once Hold has passed since the last idle start and at least Busy
// requests are in flight. It reports whether GOMAXPROCS must change and,
// while wide, after how long to check again (0 when narrow: no timer
// needed).
func (p Policy) Check(st *State, now time.Time, inFlight int) (changed bool, again time.Duration) {
	if !st.Wide {
		return false, 0
	}
	if left := st.Last.Add(p.Hold).Sub(now); left > 0 {
		return false, left
	}
	if inFlight < p.Busy {
		return false, p.Hold
	}
	st.Wide = false
	return p.Wide != p.Narrow, 0
}

// Controller applies a Policy to the process's GOMAXPROCS. Its methods are
// safe for concurrent use; a nil *Controller does nothing.
type Controller struct {
	policy Policy
	// set applies a GOMAXPROCS (runtime.GOMAXPROCS; tests record it).
	set func(int)
	// now is the clock (time.Now; tests replace it).
	now func() time.Time
	// afterFunc arms the narrowing check (time.AfterFunc; tests replace
	// it).
	afterFunc func(time.Duration, func()) func() bool

	active atomic.Int64 // requests in flight

	mu    sync.Mutex
	st    State
	armed bool        // a check is scheduled
	stop  func() bool // stops the scheduled check
	done  bool        // Close was called
}

// New returns a controller that starts wide (the process is starting up:
// loading, connecting) and narrows as Policy.Check says.
// p.Narrow below 1 is taken as 1 and p.Wide below p.Narrow as p.Narrow;
// p.Hold of 0 is DefaultHold, p.Busy of 0 DefaultBusy.
func New(p Policy) *Controller {
	return newController(p, func(n int) { runtime.GOMAXPROCS(n) }, time.Now,
		func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop })
}

func newController(p Policy, set func(int), now func() time.Time, afterFunc func(time.Duration, func()) func() bool) *Controller {
	p.Narrow = max(p.Narrow, 1)
	p.Wide = max(p.Wide, p.Narrow)
	if p.Hold <= 0 {
		p.Hold = DefaultHold
	}
	if p.Busy <= 0 {
		p.Busy = DefaultBusy
	}
	c := &Controller{policy: p, set: set, now: now, afterFunc: afterFunc}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.policy.StartIdle(&c.st, now())
	c.set(p.Wide)
	c.arm(p.Hold)
	return c
}

// Policy returns the controller's policy (after New's adjustments).
func (c *Controller) Policy() Policy { return c.policy }

// Procs returns the GOMAXPROCS the controller last applied.
func (c *Controller) Procs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.policy.Procs(c.st)
}

// Handler returns h with Begin before and End after each request (h itself
// for a nil controller).
func (c *Controller) Handler(h http.Handler) http.Handler {
	if c == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.Begin()
		defer c.End()
		h.ServeHTTP(w, r)
	})
}

// Begin records a request's start (as soon as its head is read, before its
// body is parsed and its prompt tokenized); End must follow when it ends.
func (c *Controller) Begin() {
	if c == nil {
		return
	}
	if c.active.Add(1) != 1 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	if c.policy.StartIdle(&c.st, c.now()) {
		c.set(c.policy.Wide)
	}
	if !c.armed {
		c.arm(c.policy.Hold)
	}
}

// End records a request's end.
func (c *Controller) End() {
	if c == nil {
		return
	}
	c.active.Add(-1)
}

// Close stops the controller's timer and leaves GOMAXPROCS wide.
func (c *Controller) Close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
	if c.armed {
		c.stop()
		c.armed = false
	}
	if !c.st.Wide {
		c.st.Wide = true
		c.set(c.policy.Wide)
	}
}

// arm schedules the narrowing check after d; c.mu is held.
func (c *Controller) arm(d time.Duration) {
	c.armed = true
	c.stop = c.afterFunc(d, c.check)
}

// check is the timer's visit: narrow when the hold has passed, else check
// again when it will have.
func (c *Controller) check() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = false
	if c.done {
		return
	}
	changed, again := c.policy.Check(&c.st, c.now(), int(c.active.Load()))
	if changed {
		c.set(c.policy.Narrow)
	}
	if again > 0 {
		c.arm(again)
	}
}
