// Package engineclient is the frontend's registry of in-flight requests over
// one or more engine connections.
//
// Each engine connection has one output goroutine that reads the engine's
// per-step batches and hands every output to the Sink registered for its
// request id, on that goroutine, in order. Sinks must therefore be fast and
// never block (they append to a per-request mailbox and wake the request's
// handler). A request is registered before its ADD is sent, and removed
// when it finishes, when its sink asks for an abort (a stop string), when
// the caller aborts it, or when its engine goes away (the sink's Fail is
// called; requests of other engines are untouched).
//
// With several engines (data parallel), Pick chooses the least loaded ready
// engine: its last reported waiting+running count plus the requests this
// frontend added since that report.
package engineclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-llm/sluice/ipc"
)

// ErrNoEngine is returned by Pick and Add when no engine is ready.
var ErrNoEngine = errors.New("engineclient: no engine is ready")

// ErrClosed is returned after Close.
var ErrClosed = errors.New("engineclient: closed")

// Event is a change in an engine connection's state (up with its READY
// facts, or down with a reason).
type Event = ipc.ConnEvent

// EngineConn is everything the client needs of one engine connection: send
// request and abort frames, receive the engine's output batches and its
// liveness events, run a utility call, and close. The client never sees how
// frames travel: ipc/zmqtransport's EngineConn (a ZeroMQ DEALER owned by a C
// pump thread) implements it, and unit tests use an in-memory one.
//
// An EngineConn that also has Recycle(*ipc.Outputs) gets each batch back
// once its outputs are dispatched and nothing refers into it (no logprobs),
// to decode a later batch into.
type EngineConn interface {
	// Send sends an ADD, ABORT or UTILITY frame; it fails when the engine
	// is not ready.
	Send(kind ipc.Kind, msg any) error
	// Outputs delivers the engine's batches, one per step, in order; it is
	// closed after Close.
	Outputs() <-chan *ipc.Outputs
	// Events delivers up/down changes (the engine answered READY; it went
	// silent, parked this frontend, shut down or refused us); it is closed
	// after Close.
	Events() <-chan Event
	// Call runs a utility method on the engine and waits for its result.
	Call(method string, args []byte, timeout time.Duration) (*ipc.UtilityResult, error)
	// Ready returns the engine's READY facts and whether it is up.
	Ready() (ipc.Ready, bool)
	// Close ends the connection.
	Close()
}

// Transport is EngineConn's former name, kept for the callers and tests
// written against it.
type Transport = EngineConn

// Sink receives the outputs of one request. Output and Fail run on the
// engine's output goroutine (Fail may also run on Close's goroutine); they
// must not block.
type Sink interface {
	// Output handles one engine output; now is when its batch came in (one
	// clock reading per batch, as vLLM times a step's outputs together). It
	// returns true when the request must be aborted in the engine (a stop
	// string matched); the request is then unregistered and an ABORT is sent
	// after the batch.
	Output(out *ipc.Output, now time.Time) (abort bool)
	// Fail ends the request because its engine went away or the client is
	// closing.
	Fail(reason string)
}

// Prefetcher is implemented by a Sink that can ask the CPU to load the
// memory its Output reads, in stages: stage 0 touches only the sink's own
// memory, stage k follows pointers read in stage k-1 (by then in the
// caches). With many streams each stream's state has left the caches by
// its next token; dispatch runs stage k for the sink PrefetchStages-k
// places ahead, so that the misses overlap the current stream's work.
// Kept because it pays (issue 18's paired benchmark, docs/bench/frontend.md:
// 0.69 µs per token at 1024 streams, interval 1, five alternated pairs).
type Prefetcher interface {
	Prefetch(stage int)
}

// PrefetchStages is how many sinks ahead dispatch starts prefetching.
const PrefetchStages = 3

// Options configure a Client.
type Options struct {
	// OnBatch, if set, sees every batch (on the output goroutine, before its
	// outputs are dispatched); engine is the engine's index.
	OnBatch func(engine int, b *ipc.Outputs)
	// OnState, if set, is told when an engine goes up or down.
	OnState func(engine int, up bool, reason string)
}

// Client routes requests to engines and outputs back to their sinks.
type Client struct {
	opts Options
	// batchDone is OnBatchDone's function (nil: none).
	batchDone atomic.Pointer[func(engine int)]
	engines   []*engine
	wg        sync.WaitGroup
	closed    atomic.Bool
}

type engine struct {
	idx int
	t   EngineConn

	mu     sync.Mutex
	sinks  map[string]Sink
	up     bool
	ready  ipc.Ready
	reason string // why it is down (the latest)

	// load accounting
	inflight   atomic.Int64 // registered requests
	reported   atomic.Int64 // waiting+running at the last stats
	atReport   atomic.Int64 // inflight when those stats arrived
	aborts     []string     // output goroutine only
	batchSinks []Sink       // output goroutine only
	batchPF    []Prefetcher // output goroutine only
}

// New returns a Client over the engine connections ts; call Start to begin
// reading.
func New(ts []EngineConn, opts Options) *Client {
	c := &Client{opts: opts}
	for i, t := range ts {
		e := &engine{idx: i, t: t, sinks: make(map[string]Sink)}
		e.ready, e.up = t.Ready()
		c.engines = append(c.engines, e)
	}
	return c
}

// Start starts one output goroutine and one event goroutine per engine.
func (c *Client) Start() {
	for _, e := range c.engines {
		c.wg.Add(2)
		go c.readOutputs(e)
		go c.readEvents(e)
	}
}

// NumEngines is the number of engine connections.
func (c *Client) NumEngines() int { return len(c.engines) }

// Healthy reports whether at least one engine is ready.
func (c *Client) Healthy() bool {
	for _, e := range c.engines {
		if e.isUp() {
			return true
		}
	}
	return false
}

// Ready returns the READY facts of the first ready engine.
func (c *Client) Ready() (ipc.Ready, bool) {
	for _, e := range c.engines {
		e.mu.Lock()
		r, up := e.ready, e.up
		e.mu.Unlock()
		if up {
			return r, true
		}
	}
	return ipc.Ready{}, false
}

func (e *engine) isUp() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.up
}

// Pick returns the least loaded ready engine.
func (c *Client) Pick() (int, error) {
	best, bestLoad := -1, int64(0)
	for i, e := range c.engines {
		if !e.isUp() {
			continue
		}
		in := e.inflight.Load()
		load := e.reported.Load() - e.atReport.Load()
		if load < 0 {
			load = 0
		}
		load += in
		if best < 0 || load < bestLoad {
			best, bestLoad = i, load
		}
	}
	if best < 0 {
		return -1, ErrNoEngine
	}
	return best, nil
}

// DownReason says why no engine can take requests: the latest reason each
// down engine gave, or "" when one is up.
func (c *Client) DownReason() string {
	var reasons []string
	for _, e := range c.engines {
		e.mu.Lock()
		up, reason := e.up, e.reason
		e.mu.Unlock()
		if up {
			return ""
		}
		if reason == "" {
			reason = "not connected yet"
		}
		reasons = append(reasons, reason)
	}
	return strings.Join(reasons, "; ")
}

// Add registers sink for req and sends req to engine. On error nothing stays
// registered.
func (c *Client) Add(engineIdx int, req *ipc.AddRequest, sink Sink) error {
	if c.closed.Load() {
		return ErrClosed
	}
	e := c.engines[engineIdx]
	e.mu.Lock()
	if !e.up {
		e.mu.Unlock()
		return ErrNoEngine
	}
	if _, dup := e.sinks[req.RequestID]; dup {
		e.mu.Unlock()
		return fmt.Errorf("add %s: request id already in use", req.RequestID)
	}
	e.sinks[req.RequestID] = sink
	e.mu.Unlock()
	e.inflight.Add(1)
	if err := e.t.Send(ipc.KindAdd, req); err != nil {
		e.unregister(req.RequestID)
		return fmt.Errorf("add %s: %w", req.RequestID, err)
	}
	return nil
}

// Abort unregisters ids and asks the engine to stop them. Late outputs for
// them are ignored.
func (c *Client) Abort(engineIdx int, ids ...string) {
	e := c.engines[engineIdx]
	n := 0
	for _, id := range ids {
		if e.unregister(id) {
			n++
		}
	}
	if n > 0 {
		_ = e.t.Send(ipc.KindAbort, &ipc.Abort{RequestIDs: ids})
	}
}

// unregister removes id, reporting whether it was registered.
func (e *engine) unregister(id string) bool {
	e.mu.Lock()
	_, ok := e.sinks[id]
	delete(e.sinks, id)
	e.mu.Unlock()
	if ok {
		e.inflight.Add(-1)
	}
	return ok
}

// Utility calls an engine method and waits for its result (up to ctx's
// deadline, or 10 s).
func (c *Client) Utility(ctx context.Context, engineIdx int, method string, args []byte) ([]byte, error) {
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	r, err := c.engines[engineIdx].t.Call(method, args, timeout)
	if err != nil {
		return nil, fmt.Errorf("utility %s: %w", method, err)
	}
	if r.Error != "" {
		return nil, fmt.Errorf("utility %s: %s", method, r.Error)
	}
	return r.Result, nil
}

// OnBatchDone has fn called on an engine's output goroutine after each
// batch's outputs went to their sinks (before finished requests are
// dropped): a sink that deferred work to the batch's end (the server's
// batched sends) does it there. It may be set before or after Start; the
// latest call wins.
func (c *Client) OnBatchDone(fn func(engine int)) {
	if fn == nil {
		c.batchDone.Store(nil)
		return
	}
	c.batchDone.Store(&fn)
}

// Lagging reports whether batches from engineIdx are queued behind the one
// being dispatched: the output goroutine is the bottleneck, so sinks should
// hand slow work (socket writes) to other goroutines.
func (c *Client) Lagging(engineIdx int) bool {
	return len(c.engines[engineIdx].t.Outputs()) > 0
}

// InFlight is the number of registered requests over all engines.
func (c *Client) InFlight() int {
	n := int64(0)
	for _, e := range c.engines {
		n += e.inflight.Load()
	}
	return int(n)
}

func (c *Client) readOutputs(e *engine) {
	defer c.wg.Done()
	for b := range e.t.Outputs() {
		if b == nil {
			continue
		}
		if b.Stats != nil {
			e.reported.Store(int64(b.Stats.Waiting + b.Stats.Running))
			e.atReport.Store(e.inflight.Load())
		}
		if c.opts.OnBatch != nil {
			c.opts.OnBatch(e.idx, b)
		}
		c.dispatch(e, b)
		if r, ok := e.t.(recycler); ok && recyclable(b) {
			r.Recycle(b)
		}
	}
}

// recycler is an EngineConn that can reuse a batch's memory once the client
// is done with it.
type recycler interface {
	Recycle(*ipc.Outputs)
}

// recyclable reports whether nothing can still refer into b after
// dispatch: sinks copy token ids and read events at once, but keep
// logprob entries, whose top-k slices point into the batch.
func recyclable(b *ipc.Outputs) bool {
	for i := range b.Outputs {
		if len(b.Outputs[i].Logprobs) > 0 {
			return false
		}
	}
	return true
}

// dispatch hands a batch's outputs to their sinks. The lock is taken once
// per batch to look sinks up and once to drop finished requests.
func (c *Client) dispatch(e *engine, b *ipc.Outputs) {
	outs := b.Outputs
	sinks := e.batchSinks[:0]
	e.mu.Lock()
	for i := range outs {
		sinks = append(sinks, e.sinks[outs[i].RequestID])
	}
	e.mu.Unlock()
	aborts := e.aborts[:0]
	done := 0
	now := time.Now()
	pf := e.batchPF[:0]
	for _, s := range sinks {
		p, _ := s.(Prefetcher)
		pf = append(pf, p)
	}
	for i := range outs {
		s := sinks[i]
		for stage := 0; stage < PrefetchStages; stage++ {
			if j := i + PrefetchStages - stage; j < len(pf) && pf[j] != nil {
				pf[j].Prefetch(stage)
			}
		}
		if s == nil {
			continue
		}
		o := &outs[i]
		if s.Output(o, now) {
			aborts = append(aborts, o.RequestID)
			done++
		} else if o.FinishReason != ipc.FinishNone {
			done++
		}
	}
	if fn := c.batchDone.Load(); fn != nil {
		(*fn)(e.idx)
	}
	if done > 0 {
		removed := int64(0)
		e.mu.Lock()
		for i := range outs {
			o := &outs[i]
			if sinks[i] == nil {
				continue
			}
			if o.FinishReason != ipc.FinishNone {
				if cur, ok := e.sinks[o.RequestID]; ok && cur == sinks[i] {
					delete(e.sinks, o.RequestID)
					removed++
				}
			}
		}
		for _, id := range aborts {
			if _, ok := e.sinks[id]; ok {
				delete(e.sinks, id)
				removed++
			}
		}
		e.mu.Unlock()
		e.inflight.Add(-removed)
	}
	if len(aborts) > 0 {
		_ = e.t.Send(ipc.KindAbort, &ipc.Abort{RequestIDs: append([]string(nil), aborts...)})
	}
	clear(sinks)
	e.batchSinks = sinks[:0]
	clear(pf)
	e.batchPF = pf[:0]
	e.aborts = aborts[:0]
}

func (c *Client) readEvents(e *engine) {
	defer c.wg.Done()
	for ev := range e.t.Events() {
		if ev.Up {
			e.mu.Lock()
			e.up, e.ready = true, ev.Ready
			e.mu.Unlock()
		} else {
			e.mu.Lock()
			e.up, e.reason = false, ev.Reason
			e.mu.Unlock()
			e.failAll("engine is down: " + ev.Reason)
		}
		if c.opts.OnState != nil {
			c.opts.OnState(e.idx, ev.Up, ev.Reason)
		}
	}
}

// failAll fails and unregisters every request of e.
func (e *engine) failAll(reason string) {
	e.mu.Lock()
	old := e.sinks
	e.sinks = make(map[string]Sink)
	e.mu.Unlock()
	e.inflight.Add(-int64(len(old)))
	for _, s := range old {
		s.Fail(reason)
	}
}

// Close fails every open request, closes the engine connections and waits for the
// goroutines.
func (c *Client) Close() {
	if c.closed.Swap(true) {
		return
	}
	for _, e := range c.engines {
		e.mu.Lock()
		e.up = false
		e.mu.Unlock()
		e.failAll("frontend is shutting down")
		e.t.Close()
	}
	c.wg.Wait()
}
