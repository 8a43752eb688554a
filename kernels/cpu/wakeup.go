package cpu

import (
	"sync"
	"sync/atomic"
)

// wakeup is what the pool's threads sleep on when they run out of work to
// spin for: a sequence word that a sleeper waits on until it changes. On
// Linux it is a futex (sleep blocks the thread in FUTEX_WAIT; wake is one
// FUTEX_WAKE, and only when someone sleeps), so the sleeper is woken by
// the OS on a free core at once. The portable path (other systems, pools
// without a spare processor: see newPool, and tests) is a sync.Cond, whose wake goes through the Go
// scheduler: the woken goroutine lands in the waker's local run queue
// (runnext) while the waker keeps running, and another thread steals it
// only after its runqgrab backs off (usleep(3), ≥ 50 µs with Linux's
// timer slack) — ≈ 250 µs per wake in the engine's trace, where the
// futex's wake is an OS thread wake-up.
//
// Protocol (sleepers may return spuriously, so they re-check):
//
//	sleeper: v := w.enter(); if !condition() { w.sleep(v) }; w.leave()
//	waker:   make condition() true; w.wake()
//
// Go's atomics are sequentially consistent, so either the sleeper sees
// the condition or the waker sees the sleeper (and the sequence word it
// changed makes a sleep that had not yet begun return at once).
type wakeup struct {
	seq      atomic.Uint32 // bumped by every wake; the futex word
	sleepers atomic.Int32  // threads between enter and leave
	futex    bool          // sleep on seq with futex (haveFutex), else on cond

	mu   sync.Mutex // cond's lock (portable path)
	cond sync.Cond
	_    [64]byte // keep the next field off this cache line
}

// init sets the wake-up's path: the futex where the system has one and
// futex is true, else the sync.Cond.
func (w *wakeup) init(futex bool) {
	w.futex = haveFutex && futex
	w.cond.L = &w.mu
}

// enter announces a sleeper and returns the sequence word to pass to sleep
// once the sleeper has checked its condition.
func (w *wakeup) enter() uint32 {
	w.sleepers.Add(1)
	return w.seq.Load()
}

// leave undoes enter.
func (w *wakeup) leave() { w.sleepers.Add(-1) }

// sleep blocks while the sequence word is still v (a wake since enter
// makes it return at once); it may return spuriously.
func (w *wakeup) sleep(v uint32) {
	if w.futex {
		futexWait(&w.seq, v)
		return
	}
	w.mu.Lock()
	for w.seq.Load() == v {
		w.cond.Wait()
	}
	w.mu.Unlock()
}

// wake bumps the sequence word and wakes every sleeper; it makes no system
// call (and takes no lock) when none sleeps.
func (w *wakeup) wake() {
	w.seq.Add(1)
	if w.sleepers.Load() == 0 {
		return
	}
	if w.futex {
		futexWake(&w.seq)
		return
	}
	w.mu.Lock()
	w.cond.Broadcast()
	w.mu.Unlock()
}
