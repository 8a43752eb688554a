// Package core is engine-core's process loop: it connects the transport
// (frontends' messages in, per-frontend output batches out) to the
// scheduler and the executor.
//
// One goroutine, Run's, owns the scheduler and the executor. Each turn of
// its busy loop:
//
//  1. drains the transport's inbound channel without blocking (blocking only
//     when there is no work at all): ADD, ABORT, UTILITY and
//     frontend-gone messages. When a request wakes an idle engine, the
//     loop goes on receiving for up to Options.IdleWait (the arrival
//     window), or until the waiting requests fill a step, so that a burst
//     sent together shares its first step;
//  2. plans a step (sched.Schedule), tells the executor which requests were
//     preempted, runs the step (Executor.Execute), applies the sampled
//     tokens (sched.Update) and tells the executor which requests ended;
//  3. groups the step's outputs by the frontend that submitted each request
//     and hands one *ipc.Outputs per frontend to the transport, which
//     encodes and sends on its own goroutine: the loop never waits on a
//     socket or a slow frontend.
//
// ADDs the scheduler refuses (prompt too long, bad parameters, duplicate
// id) are answered at once with a FinishError output naming the reason. A
// frontend that goes away has its requests aborted and their KV blocks
// freed. On shutdown (the context is cancelled) new ADDs are refused,
// running requests may finish for Options.DrainTimeout, whatever is left is
// ended with FinishAbort, and the transport is closed (SHUTDOWN to every
// frontend).
package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/zap"

	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/ipc/zmqtransport"
)

// Transport is what the loop needs of the engine's socket;
// *zmqtransport.EngineSocket implements it, and tests use channels.
type Transport interface {
	// Inbound delivers decoded frontend messages; it is closed when the
	// transport stops.
	Inbound() <-chan zmqtransport.Inbound
	// SendOutputs queues a batch for a frontend without blocking for long;
	// the caller gives up o.
	SendOutputs(frontend string, o *ipc.Outputs)
	// SendUtilityResult queues the answer to a utility call.
	SendUtilityResult(frontend string, r *ipc.UtilityResult)
	// Close sends SHUTDOWN with reason to every frontend and closes.
	Close(reason string)
}

// Utility methods answered by the engine.
const (
	// MethodResetPrefixCache drops the prefix cache; the result is a
	// msgpack map {"dropped_blocks": n}.
	MethodResetPrefixCache = "reset_prefix_cache"
	// MethodStats returns the msgpack-encoded ipc.SchedulerStats.
	MethodStats = "stats"
)

// Options configure the loop.
type Options struct {
	// EngineID goes into every Outputs batch.
	EngineID string
	// Sched plans the steps; Exec runs them. Both required.
	Sched *sched.Scheduler
	Exec  sched.Executor
	// Transport connects the frontends. Required.
	Transport Transport
	// Log receives lifecycle events (nil: none).
	Log *zap.Logger
	// DrainTimeout bounds how long running requests may finish after
	// shutdown begins (default 30 s).
	DrainTimeout time.Duration
	// MaxInboundPerStep bounds the messages handled between two steps
	// (default 4096), so a flood of ADDs cannot stall running streams.
	MaxInboundPerStep int
	// IdleWait is the arrival-coalescing window. When a request arrives at
	// an idle engine (nothing running or waiting), the loop keeps
	// receiving for up to IdleWait before it plans the first step, and
	// stops early once the waiting requests fill a step
	// (sched.Scheduler.WaitingFillsStep), so that a burst of requests sent
	// together is prefilled in one step instead of the first alone and the
	// rest one step later. It never waits while anything runs. 0: no
	// window (the first step starts with the first request).
	IdleWait time.Duration
	// After replaces time.After for the window's timer in tests (nil:
	// time.After).
	After func(time.Duration) <-chan time.Time
	// Now replaces the clock in tests (nil: time.Now).
	Now func() time.Time
}

// frontend is the loop's state about one frontend.
type frontend struct {
	name    string
	pending *ipc.Outputs // this step's outputs, nil when none
	live    int          // requests it submitted that have not ended
	lastLen int          // outputs in its previous batch (capacity hint)
}

// Core is the engine loop.
type Core struct {
	opts      Options
	log       *zap.Logger
	sched     *sched.Scheduler
	exec      sched.Executor
	tr        Transport
	now       func() time.Time
	after     func(time.Duration) <-chan time.Time
	owner     map[string]*frontend // request id → submitting frontend
	frontends map[string]*frontend
	dirty     []*frontend
	results   []sample.Result
	stopping  bool
	emitFn    func(*ipc.Output)
	stepTime  time.Duration
	step      uint64
}

// New checks the options and returns a loop ready to Run.
func New(opts Options) (*Core, error) {
	switch {
	case opts.Sched == nil:
		return nil, errors.New("core: no scheduler")
	case opts.Exec == nil:
		return nil, errors.New("core: no executor")
	case opts.Transport == nil:
		return nil, errors.New("core: no transport")
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 30 * time.Second
	}
	if opts.MaxInboundPerStep <= 0 {
		opts.MaxInboundPerStep = 4096
	}
	if opts.IdleWait < 0 {
		return nil, fmt.Errorf("core: negative IdleWait %s", opts.IdleWait)
	}
	c := &Core{
		opts:      opts,
		log:       opts.Log,
		sched:     opts.Sched,
		exec:      opts.Exec,
		tr:        opts.Transport,
		now:       opts.Now,
		owner:     make(map[string]*frontend),
		frontends: make(map[string]*frontend),
	}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.after = opts.After
	if c.after == nil {
		c.after = time.After
	}
	c.emitFn = c.emit
	return c, nil
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Run drives the loop until ctx is cancelled (then drains and returns nil)
// or the transport's inbound channel closes.
func (c *Core) Run(ctx context.Context) error {
	in := c.tr.Inbound()
	var deadline time.Time
	reason := "engine shutting down"
	defer func() { c.tr.Close(reason) }()
	for {
		if !c.stopping && ctx.Err() != nil {
			c.beginStop()
			deadline = c.now().Add(c.opts.DrainTimeout)
		}
		// Block only when there is nothing to compute.
		if !c.sched.HasWork() {
			c.flush()
			if c.stopping {
				c.log.Info("engine drained")
				return nil
			}
			select {
			case m, ok := <-in:
				if !ok {
					c.log.Info("transport closed")
					reason = "transport closed"
					return nil
				}
				c.handle(m)
				if c.sched.HasWork() {
					c.coalesce(ctx, in)
				}
			case <-ctx.Done():
				continue
			}
		}
		// idle: nothing to compute yet (the blocking receive above handled
		// a message that brought no work, or the only request was aborted
		// inside the window).
		idle := !c.sched.HasWork()
		for n := 0; n < c.opts.MaxInboundPerStep; n++ {
			select {
			case m, ok := <-in:
				if !ok {
					in = nil // closed: stop reading, finish what runs
					if !c.stopping {
						c.beginStop()
						deadline = c.now().Add(c.opts.DrainTimeout)
					}
					n = c.opts.MaxInboundPerStep
					continue
				}
				c.handle(m)
				if idle && c.sched.HasWork() {
					// A request reached an idle engine here rather than at
					// the blocking receive: it opens the arrival window
					// all the same.
					idle = false
					c.coalesce(ctx, in)
				}
				continue
			default:
			}
			break
		}
		if c.stopping && c.now().After(deadline) {
			c.abortAll("engine shut down before the request finished")
			c.flush()
			c.log.Warn("drain timeout: aborted the remaining requests")
			return nil
		}
		if c.sched.HasWork() && !c.Step() && in != nil {
			// Work exists but nothing could be scheduled (it should not
			// happen: a lone request always fits). Wait for news rather
			// than spin.
			c.flush()
			select {
			case m, ok := <-in:
				if ok {
					c.handle(m)
				}
			case <-time.After(time.Millisecond):
			}
		}
		c.flush()
	}
}

// coalesce is the arrival window (Options.IdleWait): the engine was idle
// and a request just arrived, so it keeps handling inbound messages until
// the window ends, the waiting requests fill a step, the inbound channel
// closes or ctx is cancelled (the caller's loop then sees why).
func (c *Core) coalesce(ctx context.Context, in <-chan zmqtransport.Inbound) {
	if c.opts.IdleWait <= 0 {
		return
	}
	start := c.now()
	timer := c.after(c.opts.IdleWait)
	why := ""
loop:
	for n := 0; c.sched.HasWork() && !c.sched.WaitingFillsStep(); n++ {
		if n == c.opts.MaxInboundPerStep {
			why = "message limit"
			break
		}
		select {
		case m, ok := <-in:
			if !ok {
				why = "transport closed"
				break loop
			}
			c.handle(m)
		case <-timer:
			why = "timer"
			break loop
		case <-ctx.Done():
			why = "shutdown"
			break loop
		}
	}
	if why == "" {
		why = "step full"
		if !c.sched.HasWork() {
			why = "nothing waiting" // aborted inside the window
		}
	}
	if ce := c.log.Check(zap.DebugLevel, "arrival window closed"); ce != nil {
		ce.Write(zap.String("why", why), zap.Int("waiting", c.sched.NumWaiting()), zap.Duration("waited", c.now().Sub(start)))
	}
}

func (c *Core) beginStop() {
	c.stopping = true
	c.log.Info("shutdown: refusing new requests, finishing running ones",
		zap.Int("running", c.sched.NumRunning()), zap.Int("waiting", c.sched.NumWaiting()),
		zap.Duration("drain_timeout", c.opts.DrainTimeout))
}

// Step runs one engine step (exported for tests and benchmarks; Run calls
// it) and reports whether anything was computed. Outputs are queued per
// frontend until flush.
func (c *Core) Step() bool {
	start := c.now()
	b := c.sched.Schedule(unix(start))
	c.sched.DrainReleased(c.exec.Release)
	if len(b.Seqs) == 0 {
		return false
	}
	c.step = b.Step
	if cap(c.results) < len(b.Seqs) {
		c.results = make([]sample.Result, len(b.Seqs), 2*len(b.Seqs))
	}
	res := c.results[:len(b.Seqs)]
	if err := c.exec.Execute(b, res); err != nil {
		c.log.Error("executor failed; ending the step's requests", zap.Uint64("step", b.Step), zap.Error(err))
		c.sched.FailBatch(b, fmt.Sprintf("engine executor failed: %v", err), c.emitFn)
	} else {
		c.sched.Update(b, res, unix(c.now()), c.emitFn)
	}
	c.sched.DrainReleased(c.exec.Release)
	c.stepTime = c.now().Sub(start)
	if ce := c.log.Check(zap.DebugLevel, "step"); ce != nil {
		prefill := 0
		for i := range b.Seqs {
			if len(b.Seqs[i].Tokens) > 1 || !b.Seqs[i].Sample {
				prefill++
			}
		}
		ce.Write(zap.Uint64("step", b.Step), zap.Int("seqs", len(b.Seqs)), zap.Int("prefill_seqs", prefill),
			zap.Int("tokens", b.NumTokens), zap.Duration("took", c.stepTime))
	}
	return true
}

// handle applies one inbound message.
func (c *Core) handle(m zmqtransport.Inbound) {
	switch m.Kind {
	case ipc.KindAdd:
		if m.Add == nil {
			return
		}
		if c.stopping {
			c.refuse(m.Frontend, m.Add.RequestID, "engine is shutting down")
			return
		}
		if err := c.sched.Add(m.Add, unix(c.now())); err != nil {
			c.log.Debug("request refused", zap.String("request_id", m.Add.RequestID), zap.Error(err))
			c.refuse(m.Frontend, m.Add.RequestID, err.Error())
			return
		}
		fe := c.frontend(m.Frontend)
		c.owner[m.Add.RequestID] = fe
		fe.live++
	case ipc.KindAbort:
		if m.Abort == nil {
			return
		}
		aborted := false
		for _, id := range m.Abort.RequestIDs {
			if fe, ok := c.owner[id]; ok && fe.name == m.Frontend {
				c.sched.Abort(id)
				delete(c.owner, id)
				fe.live--
				aborted = true
			}
		}
		if aborted {
			c.touchAll()
		}
	case ipc.KindUtility:
		if m.Utility != nil {
			c.tr.SendUtilityResult(m.Frontend, c.utility(m.Utility))
		}
	case zmqtransport.KindFrontendGone:
		fe, ok := c.frontends[m.Frontend]
		if !ok {
			return
		}
		n := 0
		for id, o := range c.owner {
			if o == fe {
				c.sched.Abort(id)
				delete(c.owner, id)
				n++
			}
		}
		delete(c.frontends, m.Frontend)
		c.dropDirty(fe)
		c.log.Info("frontend gone: aborted its requests", zap.String("frontend", m.Frontend), zap.Int("aborted", n))
		if n > 0 {
			c.touchAll()
		}
	}
}

func (c *Core) frontend(name string) *frontend {
	fe, ok := c.frontends[name]
	if !ok {
		fe = &frontend{name: name}
		c.frontends[name] = fe
	}
	return fe
}

// refuse answers an ADD with FinishError.
func (c *Core) refuse(frontend, id, msg string) {
	c.queue(c.frontend(frontend), ipc.Output{RequestID: id, FinishReason: ipc.FinishError, StopReason: -1, Error: msg})
}

// emit receives the scheduler's outputs.
func (c *Core) emit(o *ipc.Output) {
	fe, ok := c.owner[o.RequestID]
	if !ok {
		return // its frontend is gone
	}
	if o.FinishReason != ipc.FinishNone {
		delete(c.owner, o.RequestID)
		fe.live--
	}
	c.queue(fe, *o)
}

func (c *Core) queue(fe *frontend, o ipc.Output) {
	if fe.pending == nil {
		fe.pending = &ipc.Outputs{Outputs: make([]ipc.Output, 0, max(fe.lastLen, 4))}
		c.dirty = append(c.dirty, fe)
	}
	fe.pending.Outputs = append(fe.pending.Outputs, o)
}

// touchAll makes the next flush send every frontend a batch, empty if need
// be, so their copies of the scheduler stats (running, waiting, KV usage)
// stay current when requests end without outputs (aborts) on an engine that
// then goes idle.
func (c *Core) touchAll() {
	for _, fe := range c.frontends {
		if fe.pending == nil {
			fe.pending = &ipc.Outputs{}
			c.dirty = append(c.dirty, fe)
		}
	}
}

// dropDirty removes fe (a frontend that is gone) from this step's batches.
func (c *Core) dropDirty(fe *frontend) {
	for i, d := range c.dirty {
		if d == fe {
			c.dirty = append(c.dirty[:i], c.dirty[i+1:]...)
			break
		}
	}
	fe.pending = nil
}

// flush hands each frontend its batch.
func (c *Core) flush() {
	if len(c.dirty) == 0 {
		return
	}
	st := c.sched.Stats()
	st.StepTimeMicros = c.stepTime.Microseconds()
	ts := unix(c.now())
	for i, fe := range c.dirty {
		out := fe.pending
		fe.pending = nil
		fe.lastLen = len(out.Outputs)
		c.dirty[i] = nil
		out.EngineID = c.opts.EngineID
		out.Step = c.step
		out.Timestamp = ts
		s := st
		s.RunningByFrontend = int32(fe.live)
		out.Stats = &s
		c.tr.SendOutputs(fe.name, out)
	}
	c.dirty = c.dirty[:0]
}

// abortAll ends every live request with FinishAbort and message msg.
func (c *Core) abortAll(msg string) {
	for id, fe := range c.owner {
		c.sched.Abort(id)
		delete(c.owner, id)
		fe.live--
		c.queue(fe, ipc.Output{RequestID: id, FinishReason: ipc.FinishAbort, StopReason: -1, Error: msg})
	}
	c.sched.DrainReleased(c.exec.Release)
}

// utility answers a utility call.
func (c *Core) utility(u *ipc.Utility) *ipc.UtilityResult {
	r := &ipc.UtilityResult{CallID: u.CallID}
	var v any
	switch u.Method {
	case MethodResetPrefixCache:
		n := c.sched.ResetPrefixCache()
		c.log.Info("prefix cache reset", zap.Int("dropped_blocks", n))
		v = map[string]int{"dropped_blocks": n}
	case MethodStats:
		st := c.sched.Stats()
		st.StepTimeMicros = c.stepTime.Microseconds()
		v = &st
	default:
		r.Error = fmt.Sprintf("unknown utility method %q", u.Method)
		return r
	}
	b, err := msgpack.Marshal(v)
	if err != nil {
		r.Error = fmt.Sprintf("encode %s result: %v", u.Method, err)
		return r
	}
	r.Result = b
	return r
}
