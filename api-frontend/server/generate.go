package server

import (
	"bytes"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/sluice-llm/sluice/api-frontend/internal/prefetch"
	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/api-frontend/render"
	"github.com/sluice-llm/sluice/api-frontend/sse"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/outputproc"
	"github.com/sluice-llm/sluice/outputproc/stopstr"
)

// streamState is where a request's response stands. It only moves forward.
type streamState uint8

const (
	// stateQueued: the request is registered and no engine output has
	// come yet; it counts in Server.waiting (the queue limit).
	stateQueued streamState = iota
	// stateRunning: outputs are arriving and rendered into buf.
	stateRunning
	// stateEnded: every completion finished, or the request failed: the
	// final events (usage, [DONE], or the error event) are in buf, or err
	// is set for a non-streamed request. Later outputs are ignored.
	stateEnded
	// stateClosed: the final bytes have been handed to the socket
	// (written, or queued in framed for the handler), or the stream's
	// handler returned: nothing more is rendered or written except
	// framed.
	stateClosed
)

// stream is one HTTP generation request: its completions (choices), its
// renderer and the bytes on their way to its socket.
//
// Who writes the socket: the handler goroutine (Server.serveStream) owns
// it. The engine's output goroutine may write it only when it can do so at
// once, all under mu: the stream has a direct Conn, the handler is not
// writing (writing false), nothing is left in framed, and the engine is not
// lagging. It then sends the chunk with one non-blocking send; whatever the
// socket does not take goes to framed and the handler is woken, which
// hands the socket back to the handler until framed is drained. The
// handler sets writing under mu before it writes outside the lock and
// clears it after; while it is set, outputs are held back in the
// processors (which coalesce them) and rendered bytes only append to buf.
// The final bytes go out from the output goroutine only when the Conn's
// Sender allows it (sse.Sender.DirectEnd); on a kept connection the
// handler writes them, and net/http sends them with its terminating chunk.
type stream struct {
	s  *Server
	mu sync.Mutex // guards the fields up to the next comment, and the choices' state

	state   streamState
	writing bool // the handler is writing outside mu
	// queued: a chunk of this stream waits in its engine's send batch
	// (engineSends) and the socket is the output goroutine's until the
	// step's flush; waitQueued: the handler waits for that flush.
	queued, waitQueued bool
	buf                []byte // rendered bytes not yet written, after sse.Headroom
	events             int    // SSE events in buf (metrics)
	framed             []byte // framed bytes a partial direct write left; the handler writes them first
	held               int    // bytes the processors hold back (bounded with buf and framed)
	conn               sse.Conn
	direct             bool       // conn.Direct(), read once when conn is set
	send               sse.Sender // conn.Sender(): the direct path without a pointer to follow
	engine             int
	err                *openai.Error // the request failed (stream: its error event is queued)

	// Immutable once run starts; read for every token, so kept next to
	// the fields above (a thousand streams' state is cold by each one's
	// next token, and every cache line is a miss).
	stream      bool
	maxBuffered int             // bound on buf+framed+held (0: none)
	rend        render.Renderer // points into renderers
	prefix      []byte          // the renderer's chunk prefix (prefetched)
	renderers   struct {        // the request's renderer, in this allocation
		completions render.Completions
		chat        render.Chat
	}

	cached int // prompt tokens found in the prefix cache (max over choices)
	// hotEnd marks the end of the fields Output reads for every token
	// (Prefetch stage 1 loads up to here; TestPrefetchCoversHotFields).
	hotEnd struct{}

	remaining int // choices not finished
	choices   []*choice

	// Immutable once run starts.
	opts         *openai.Options
	stopSet      *stopstr.Set // opts.Stops compiled once, shared by the choices
	id           string
	arrival      time.Time
	promptTokens int // usage: prompt tokens, once per prompt

	wake chan struct{} // one slot: wakes coalesce

	// bufBox is the pool's box of buf (sse.GetBuf), which buf goes back
	// in: boxing it anew would allocate per request.
	bufBox *[]byte
	// endUsage is end's usage, kept here: AppendEnd takes a pointer, and
	// a local would escape to the heap.
	endUsage outputproc.Usage

	// clientGone: a send to the client failed (set, then wake); the
	// handler then returns.
	clientGone atomic.Bool

	// choice0 holds the first choice (most requests have one) in the
	// request's own allocation.
	choice0 choice
}

// choice is one completion of a request (one engine request).
type choice struct {
	r        *stream
	proc     outputproc.Processor
	lastOut  time.Time
	index    int
	finished bool
	// afterReasoning: the constraint starts after the reasoning end.
	afterReasoning bool
	engineID       string
	promptIDs      []int32
	numTokens      int
	// hotEnd marks the end of the fields Output reads for every token
	// (Prefetch stage 0 loads up to here; TestPrefetchCoversHotFields).
	hotEnd struct{}
	acc    outputproc.Accumulator // non-streamed requests
}

// Output implements engineclient.Sink; it runs on the engine's output
// goroutine.
func (ch *choice) Output(out *ipc.Output, now time.Time) bool {
	r := ch.r
	r.mu.Lock()
	if r.state >= stateEnded || ch.finished {
		r.mu.Unlock()
		return false
	}
	r.leaveQueue()
	if ch.lastOut.IsZero() {
		r.s.metrics.ttft.Observe(now.Sub(r.arrival).Seconds())
		recordQueue(r.s.metrics, out.Events)
	} else if len(out.NewTokenIDs) > 0 {
		r.s.metrics.itl.Observe(now.Sub(ch.lastOut).Seconds())
	}
	ch.lastOut = now
	hold := r.stream && (len(r.buf) > sse.Headroom || len(r.framed) > 0 || r.writing || r.queued)
	before := ch.proc.PendingBytes()
	// The engine's scratch delta: in the caches from one output to the
	// next (a stack variable would move to the heap through the
	// renderer's interface call).
	d := &r.s.deltas[r.engine].Delta
	ok, abort := ch.proc.ProcessInto(out, hold, d)
	r.held += ch.proc.PendingBytes() - before
	wake := false
	if ok {
		// When the chunk can go straight to the socket, render it in a
		// pooled scratch buffer, which stays in this core's cache from one
		// token to the next, instead of the stream's own buffer, whose
		// lines 1024 streams have evicted since its last token.
		var scratch *[]byte
		var mailbox []byte
		if r.stream && !hold && r.directReady() {
			scratch = sse.GetBuf()
			mailbox, r.buf = r.buf, *scratch
		}
		ch.deliver(d)
		// Write from here when the socket takes it at once; otherwise (or
		// with no direct path) the handler goroutine writes.
		wake = !r.tryDirect()
		if scratch != nil {
			*scratch, r.buf = r.buf, mailbox
			if len(*scratch) > sse.Headroom { // not written: the engine began lagging
				r.buf = append(r.buf, (*scratch)[sse.Headroom:]...)
			}
			sse.PutBuf(scratch)
		}
	}
	if r.overBuffered() {
		r.overflow()
		wake = true
	}
	r.mu.Unlock()
	if wake {
		r.signal()
	}
	return abort
}

// Prefetch implements engineclient.Prefetcher: stage 0 the choice up to
// its hotEnd (its processor), stage 1 the stream up to its hotEnd (lock,
// buffers, socket, renderer), stage 2 the renderer's chunk prefix: what
// Output reads first.
func (ch *choice) Prefetch(stage int) {
	switch stage {
	case 0:
		prefetch.Range(unsafe.Pointer(ch), unsafe.Offsetof(ch.hotEnd))
	case 1:
		r := ch.r
		prefetch.Range(unsafe.Pointer(r), unsafe.Offsetof(r.hotEnd))
	case 2:
		if p := ch.r.prefix; len(p) > 0 {
			prefetch.Range(unsafe.Pointer(unsafe.SliceData(p)), uintptr(len(p)))
		}
	}
}

// leaveQueue moves a queued request to running; mu is held.
func (r *stream) leaveQueue() {
	if r.state == stateQueued {
		r.state = stateRunning
		r.s.waiting.Add(-int64(len(r.choices)))
	}
}

// overBuffered reports whether the stream holds more than its bound: a
// client that does not read; mu is held.
func (r *stream) overBuffered() bool {
	return r.maxBuffered > 0 && r.state < stateEnded &&
		len(r.buf)+len(r.framed)+r.held > r.maxBuffered
}

// overflow ends a stream whose client does not read: the request fails
// (its engine requests are aborted when the handler returns) and the
// socket's writes fail at once, so the handler, blocked in a write, returns
// and the buffers go; mu is held.
func (r *stream) overflow() {
	r.s.log.Warn("client not reading: ending its stream", zap.String("id", r.id), zap.Int("limit_bytes", r.maxBuffered))
	r.fail(openai.NewError(http.StatusServiceUnavailable,
		"the client did not read the stream: more than %d bytes buffered (--max-stream-buffer-bytes); the request was aborted", r.maxBuffered))
	r.clientGone.Store(true)
	if r.conn != nil {
		r.conn.Abort()
	}
}

// directReady reports whether tryDirect may write now (before the lagging
// check); mu is held.
func (r *stream) directReady() bool {
	return r.direct && !r.writing && !r.queued && len(r.framed) == 0 && r.state < stateClosed
}

// tryDirect writes buf to the socket without blocking, on the engine's
// output goroutine, saving the handler goroutine's wake-up per chunk. It
// reports whether the handler can stay asleep: false when the writer rule
// (see stream) does not allow a direct write, the socket took only part
// (the rest goes to framed for the handler), or the stream ended. mu is
// held.
func (r *stream) tryDirect() bool {
	if !r.directReady() {
		return false
	}
	if r.s.deps.Engines.Lagging(r.engine) {
		// Batches are queueing behind this one: spread the writes over the
		// handler goroutines (all cores) instead.
		return false
	}
	size := len(r.buf) - sse.Headroom
	last := r.state == stateEnded
	if size <= 0 && !last {
		return true
	}
	if last && !r.send.DirectEnd() {
		// The handler writes the end, so that net/http sends it with its
		// terminating chunk (one send for both).
		return false
	}
	b := r.send.Frame(&r.buf, last)
	if !last {
		if bt := r.s.batchFor(r.engine); bt != nil {
			if _, ok := r.send.Queue(bt, b); ok {
				r.queueSend(size)
				return true
			}
		}
	}
	n, err := r.send.TrySend(b)
	if last {
		r.state = stateClosed
	}
	if n > 0 {
		r.s.metrics.Chunks.Add(float64(r.events))
		r.s.metrics.Bytes.Add(float64(size))
		r.events = 0
	}
	if err != nil && !errors.Is(err, syscall.EAGAIN) {
		r.clientGone.Store(true)
		r.buf = r.buf[:sse.Headroom]
		return false
	}
	n = max(n, 0)
	if n < len(b) {
		r.framed = append(r.framed, b[n:]...)
		r.buf = r.buf[:sse.Headroom]
		return false
	}
	r.buf = r.buf[:sse.Headroom]
	return !last
}

func recordQueue(m *Metrics, evs []ipc.Event) {
	var q, sch float64
	for _, e := range evs {
		switch e.Type {
		case ipc.EventQueued:
			q = e.Timestamp
		case ipc.EventScheduled:
			if sch == 0 {
				sch = e.Timestamp
			}
		}
	}
	if q > 0 && sch >= q {
		m.queue.Observe(sch - q)
	}
}

// Fail implements engineclient.Sink: the engine went away.
func (ch *choice) Fail(reason string) {
	r := ch.r
	r.mu.Lock()
	if r.state < stateEnded && !ch.finished {
		if d := ch.proc.Fail(reason); d != nil {
			ch.deliver(d)
		}
	}
	r.mu.Unlock()
	r.signal()
}

func (r *stream) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// deliver handles one delta of ch: the renderer appends its events
// (streams) or the accumulator keeps it (non-streamed); mu is held.
func (ch *choice) deliver(d *outputproc.Delta) {
	r := ch.r
	ch.numTokens = d.Usage.CompletionTokens
	if d.Usage.CachedTokens > r.cached {
		r.cached = d.Usage.CachedTokens
	}
	if r.stream {
		n := len(r.buf)
		r.buf = r.rend.AppendDelta(r.buf, d)
		if len(r.buf) > n {
			r.events++
		}
	} else {
		ch.acc.Add(d)
	}
	if len(d.TokenIDs) > 1 {
		r.s.metrics.CoalescedTokens.Add(float64(len(d.TokenIDs) - 1))
	}
	if !d.Finished() {
		return
	}
	ch.finished = true
	r.remaining--
	reason := d.Finish.Reason.String()
	promptTokens := 0
	if ch.index%r.opts.N == 0 {
		promptTokens = len(ch.promptIDs) // once per prompt, not per choice
	}
	r.s.metrics.Finished(reason, promptTokens, ch.numTokens, time.Since(r.arrival).Seconds())
	if d.Failed() {
		r.fail(&openai.Error{Status: http.StatusInternalServerError, Type: "InternalServerError", Message: d.Finish.Error})
		return
	}
	if r.remaining == 0 {
		r.end()
	}
}

// fail ends the request with e; mu is held.
func (r *stream) fail(e *openai.Error) {
	if r.state >= stateEnded {
		return
	}
	r.leaveQueue()
	r.err = e
	r.state = stateEnded
	if r.stream {
		n := len(r.buf)
		r.buf = r.rend.AppendError(r.buf, e)
		r.events += bytes.Count(r.buf[n:], []byte("\n\n"))
	}
}

// end queues the stream's closing events once every choice finished; mu
// is held.
func (r *stream) end() {
	r.state = stateEnded
	if !r.stream {
		return
	}
	r.endUsage = r.usage()
	n := len(r.buf)
	r.buf = r.rend.AppendEnd(r.buf, &r.endUsage)
	r.events += bytes.Count(r.buf[n:], []byte("\n\n"))
}

// usage is the whole request's usage; mu is held.
func (r *stream) usage() outputproc.Usage {
	u := outputproc.Usage{PromptTokens: r.promptTokens, CachedTokens: r.cached}
	for _, c := range r.choices {
		u.CompletionTokens += c.numTokens
	}
	return u
}

// admit checks draining and the queue limit for a request of seqs
// sequences (the limit counts sequences, so one request with n 128 weighs
// as much as 128 requests with n 1).
func (s *Server) admit(seqs int) *openai.Error {
	if s.draining.Load() {
		s.metrics.Rejected.WithLabelValues("draining").Inc()
		return openai.NewError(http.StatusServiceUnavailable, "the server is shutting down")
	}
	if s.deps.Engines == nil || !s.deps.Engines.Healthy() {
		s.metrics.Rejected.WithLabelValues("engine_down").Inc()
		if s.deps.Engines != nil {
			if why := s.deps.Engines.DownReason(); why != "" {
				return openai.NewError(http.StatusServiceUnavailable, "the engine is not available: %s", why)
			}
		}
		return openai.NewError(http.StatusServiceUnavailable, "the engine is not available")
	}
	if limit := int64(s.cfg.MaxQueuedRequests); limit > 0 {
		if int64(seqs) > limit {
			return openai.BadRequest("n", "this request has %d sequences (prompts × n), more than --max-queued-requests (%d)", seqs, limit)
		}
		if s.waiting.Load()+int64(seqs) > limit {
			s.metrics.Rejected.WithLabelValues("queue_full").Inc()
			return openai.NewError(http.StatusTooManyRequests, "too many queued sequences (limit %d, --max-queued-requests); retry later", limit)
		}
	}
	return nil
}

// run registers the request's choices with the engine and serves the
// response. The choices, options and renderer must be filled in.
func (s *Server) run(c *gin.Context, r *stream) {
	if e := s.admit(len(r.choices)); e != nil {
		if e.Status == http.StatusTooManyRequests {
			c.Header("Retry-After", "1")
		}
		writeError(c, e)
		return
	}
	eng, err := s.deps.Engines.Pick()
	if err != nil {
		writeError(c, openai.NewError(http.StatusServiceUnavailable, "the engine is not available"))
		return
	}
	r.engine = eng
	r.stream = r.opts.Stream
	r.maxBuffered = s.cfg.MaxStreamBufferBytes
	r.wake = make(chan struct{}, 1)
	if r.stream {
		r.bufBox = sse.GetBuf()
		r.buf = *r.bufBox
	}
	r.remaining = len(r.choices)
	s.streams.Add(1)
	defer s.streams.Done()
	s.waiting.Add(int64(len(r.choices)))
	defer func() {
		r.mu.Lock()
		r.leaveQueue()
		r.mu.Unlock()
	}()
	arrival := float64(r.arrival.UnixNano()) / 1e9
	for i, ch := range r.choices {
		p := r.opts.Params
		if p.HasSeed {
			p.Seed += int64(ch.index % r.opts.N)
		}
		if p.Constraint != nil && ch.afterReasoning {
			ct := *p.Constraint
			ct.AfterReasoning = true
			p.Constraint = &ct
		}
		req := &ipc.AddRequest{RequestID: ch.engineID, PromptTokenIDs: ch.promptIDs, Params: p, ArrivalTime: arrival, Priority: r.opts.Priority}
		if err := s.deps.Engines.Add(eng, req, ch); err != nil {
			s.abortChoices(r, r.choices[:i])
			s.log.Warn("add request", zap.String("id", r.id), zap.Error(err))
			writeError(c, openai.NewError(http.StatusServiceUnavailable, "the engine is not available: %v", err))
			return
		}
	}
	defer func() {
		if n := s.abortChoices(r, r.choices); n > 0 {
			// Ended by the client (disconnect) or the server before they
			// finished: counted as vLLM does, finished_reason="abort".
			for range n {
				s.metrics.Finished("abort", 0, 0, time.Since(r.arrival).Seconds())
			}
		}
	}()
	if r.stream {
		s.serveStream(c, r)
	} else {
		s.wait(c, r)
	}
}

// abortChoices aborts the unfinished choices in the engine and reports how
// many there were.
func (s *Server) abortChoices(r *stream, chs []*choice) int {
	var ids []string
	r.mu.Lock()
	for _, ch := range chs {
		if !ch.finished {
			ids = append(ids, ch.engineID)
		}
	}
	r.mu.Unlock()
	if len(ids) > 0 {
		s.deps.Engines.Abort(r.engine, ids...)
	}
	return len(ids)
}

// serveStream is the handler's side of the writer rule (see stream): it
// writes what the output goroutine left in buf and framed until the stream
// is closed.
func (s *Server) serveStream(c *gin.Context, r *stream) {
	s.metrics.StreamsOpen.Inc()
	defer s.metrics.StreamsOpen.Dec()
	w, err := sse.Start(c.Writer, c.Request, s.cfg.sndBuf)
	if err != nil {
		return // client gone before the head was sent
	}
	defer w.Close()
	r.mu.Lock()
	r.conn, r.direct, r.send = w, w.Direct(), w.Sender()
	// What arrived before the socket was attached signalled already (no
	// direct path then); signal again only if bytes wait, saving a wake.
	pending := len(r.buf) > sse.Headroom || len(r.framed) > 0 || r.state == stateEnded
	r.mu.Unlock()
	if pending {
		r.signal()
	}
	spare := sse.GetBuf()
	var framed []byte
	defer func() {
		// Nothing is rendered or written from here on (a client that went
		// away leaves the stream running until run aborts its engine
		// requests: their outputs are dropped), so both buffers' arrays go
		// back to the pool. A chunk in the engine's send batch goes
		// first: the socket is released when this returns.
		r.mu.Lock()
		for r.queued {
			r.waitQueued = true
			r.mu.Unlock()
			<-r.wake
			r.mu.Lock()
		}
		r.leaveQueue()
		r.state = stateClosed
		box := r.bufBox
		if box == nil {
			box = new([]byte)
		}
		*box, r.buf, r.bufBox = r.buf, nil, nil
		r.conn, r.direct, r.send = nil, false, sse.Sender{}
		r.mu.Unlock()
		*spare = (*spare)[:0]
		sse.PutBuf(spare)
		sse.PutBuf(box)
	}()
	// The client going away and the server's end of streams are channels
	// selected beside the wake-ups (no callbacks to register per request).
	gone, ending := w.Gone(), s.endCtx.Done()
	// headDue: a head held for the first chunk has waited long enough
	// and goes alone (sse's keptSSE on httpserve).
	var headDue <-chan struct{}
	if hd, ok := w.(interface{ HeadDue() <-chan struct{} }); ok {
		headDue = hd.HeadDue()
	}
	for {
		sendHead := false
		select {
		case <-r.wake:
		case <-headDue:
			sendHead = true
		case <-gone:
			return // run's defer aborts the engine requests
		case <-ending:
			ending = nil // once
			s.endRequest(r, "the server is shutting down")
		}
		if r.clientGone.Load() {
			return // a send failed; run's defer aborts the engine requests
		}
		r.mu.Lock()
		if r.queued {
			// The output goroutine sends a chunk at the step's end and
			// wakes this handler then if anything is left.
			r.waitQueued = true
			r.mu.Unlock()
			continue
		}
		framed, r.framed = r.framed, framed[:0]
		*spare, r.buf = r.buf, (*spare)[:sse.Headroom]
		out := spare
		n := r.events
		r.events = 0
		last := r.state == stateEnded
		if last {
			r.state = stateClosed
		}
		closed := r.state == stateClosed
		r.writing = true
		r.mu.Unlock()
		var werr error
		if len(framed) > 0 || sendHead {
			werr = w.WriteRaw(framed)
		}
		size := len(*out) - sse.Headroom
		if werr == nil && (size > 0 || last) {
			werr = w.Write(out, last)
			s.metrics.Chunks.Add(float64(n))
			s.metrics.Bytes.Add(float64(size))
		}
		r.mu.Lock()
		r.writing = false
		more := len(r.buf) > sse.Headroom || len(r.framed) > 0 || r.state == stateEnded
		r.mu.Unlock()
		if werr != nil || (closed && !more) {
			return
		}
		if more {
			r.signal() // appended while we wrote
		}
	}
}

// endRequest flushes every choice's pending output and ends the request
// with an error (shutdown timeout).
func (s *Server) endRequest(r *stream, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state >= stateEnded {
		return
	}
	for _, ch := range r.choices {
		if !ch.finished {
			if d := ch.proc.Pending(); d != nil {
				ch.deliver(d)
			}
		}
	}
	r.fail(openai.NewError(http.StatusServiceUnavailable, "%s", msg))
}

// wait serves a non-streamed response once every choice has finished.
func (s *Server) wait(c *gin.Context, r *stream) {
	gone, ending := c.Request.Context().Done(), s.endCtx.Done()
	for {
		select {
		case <-r.wake:
		case <-gone:
			return
		case <-ending:
			ending = nil // once
			s.endRequest(r, "the server is shutting down")
		}
		r.mu.Lock()
		done, e := r.state >= stateEnded, r.err
		r.mu.Unlock()
		if !done {
			continue
		}
		if e != nil {
			writeError(c, e)
			return
		}
		r.mu.Lock()
		accs := make([]*outputproc.Accumulator, len(r.choices))
		for i, ch := range r.choices {
			accs[i] = &ch.acc
		}
		u := r.usage()
		body := r.rend.Body(accs, &u)
		r.mu.Unlock()
		c.Data(http.StatusOK, "application/json", body)
		return
	}
}
