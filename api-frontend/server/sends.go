package server

import (
	"errors"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-llm/sluice/api-frontend/sse"
)

// sendBatchMax is the most direct sends one engine step queues; a step
// with more streams sends the rest one by one, as without a batch.
const sendBatchMax = 2048

// engineSends is one engine's batch of direct sends. While the engine's
// output goroutine dispatches a step, a stream whose chunk may go to its
// socket at once (stream.tryDirect) queues the chunk here instead of
// sending it, and flushSends sends the step's chunks together at the
// step's end (engineclient.Client.OnBatchDone): with io_uring one system
// call for the step instead of one send(2) per stream. Only that goroutine
// touches it.
//
// A queued stream is in flight (stream.queued): until the flush, nothing
// else writes its socket: the output goroutine renders its next bytes
// into buf only, and its handler, if woken, waits for the flush (which
// wakes it when anything is left to write) before it writes or returns
// (returning releases the socket).
type engineSends struct {
	b     *sse.Batch    // nil until a stream first queues, and where no batch can be made
	tried bool          // newBatch was called (once)
	pend  []pendingSend // the queued sends' streams, in the batch's order
	cpu   time.Duration // b.SendCPU() already added to the metrics
	sent  atomic.Int64  // chunks sent through the batch (tests)
	short atomic.Int64  // of which the socket did not take all (tests)
	_     [32]byte      // two engines' goroutines do not share a line
}

// pendingSend is one queued chunk's stream and what it counts in the
// metrics once sent.
type pendingSend struct {
	r            *stream
	events, size int
}

// batchFor returns the batch engine's output goroutine may queue a send
// in, or nil (send at once): batching is off, no batch can be made, or
// this step's batch is full.
func (s *Server) batchFor(engine int) *sse.Batch {
	if s.sends == nil {
		return nil
	}
	es := &s.sends[engine]
	if es.b == nil {
		if es.tried {
			return nil
		}
		es.tried = true
		newBatch := s.newBatch
		if newBatch == nil {
			newBatch = sse.NewBatch
		}
		b, err := newBatch(sendBatchMax)
		if err != nil {
			s.log.Info("stream chunks are sent one by one", zap.Int("engine", engine), zap.Error(err))
			return nil
		}
		es.b = b
	}
	if es.b.Full() {
		return nil
	}
	return es.b
}

// queueSend notes that the stream's framed chunk of size payload bytes
// is queued in its engine's batch (sse.Sender.Queue) and puts the stream
// in flight; mu is held.
func (r *stream) queueSend(size int) {
	es := &r.s.sends[r.engine]
	es.pend = append(es.pend, pendingSend{r: r, events: r.events, size: size})
	r.events = 0
	r.queued = true
	r.buf = r.buf[:sse.Headroom]
}

// flushSends sends engine's queued chunks and hands each stream its
// socket back: what a socket did not take goes to framed and the handler
// is woken, as after a partial direct send. It runs on the engine's output
// goroutine at the end of each step.
func (s *Server) flushSends(engine int) {
	es := &s.sends[engine]
	if len(es.pend) == 0 {
		return
	}
	ferr := es.b.Flush()
	es.sent.Add(int64(len(es.pend)))
	cpu := es.b.SendCPU()
	s.metrics.SendCPU.Add((cpu - es.cpu).Seconds())
	s.metrics.BatchSends.Add(float64(len(es.pend)))
	es.cpu = cpu
	for i := range es.pend {
		p := &es.pend[i]
		r := p.r
		n, err := es.b.Result(i)
		r.mu.Lock()
		r.queued = false
		wake := r.waitQueued
		r.waitQueued = false
		if n > 0 {
			s.metrics.Chunks.Add(float64(p.events))
			s.metrics.Bytes.Add(float64(p.size))
		}
		switch b := es.b.Bytes(i); {
		case err != nil && !errors.Is(err, syscall.EAGAIN):
			r.clientGone.Store(true)
			wake = true
		case n < len(b):
			r.framed = append(r.framed, b[n:]...)
			wake = true
			es.short.Add(1)
		}
		if len(r.buf) > sse.Headroom || r.state == stateEnded {
			wake = true // rendered while in flight
		}
		r.mu.Unlock()
		if wake {
			r.signal()
		}
		*p = pendingSend{}
	}
	es.pend = es.pend[:0]
	es.b.Reset()
	if ferr != nil {
		// The ring failed: from the next step on, chunks go one by one.
		s.log.Warn("batched sends failed; sending one by one", zap.Int("engine", engine), zap.Error(ferr))
		es.b.Close()
		es.b = nil
	}
}
