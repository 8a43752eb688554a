package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/sluice-llm/sluice/api-frontend/internal/prefetch"
	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/outputproc"
	"github.com/sluice-llm/sluice/outputproc/stopstr"
	"github.com/sluice-llm/sluice/outputproc/toolparse"
)

// genRequest is one HTTP generation request and its choices. mu guards the
// mailbox and the choices' output state; the engine's output goroutine
// fills the mailbox, the handler goroutine drains it.
//
// The fields the output goroutine touches for every token come first, so
// that they share few cache lines: with 1024 streams a stream's state has
// left the CPU caches by its next token, and each line is a miss.
type genRequest struct {
	s  *Server
	mu sync.Mutex

	buf    []byte // pending SSE bytes (stream), after chunkHeadroom
	events int    // SSE events in buf
	// Direct writes (hijacked HTTP/1.1 streams): the output goroutine writes
	// the mailbox itself when the socket accepts it at once.
	direct *hijackedSSE
	fd     int    // direct.fd, valid while direct is set
	framed []byte // framed bytes a partial direct write left, written first
	engine int

	done       bool
	firstSeen  bool // a choice produced its first output
	writing    bool // the handler is writing: others only append
	terminated bool // the final chunk is written or in framed
	chat       bool
	// copies of opts fields, set by run
	stream    bool
	contUsage bool
	logprobs  int

	opts      *openai.Options
	stopSet   *stopstr.Set // opts.Stops compiled once, shared by the choices
	hdr       openai.StreamHeader
	remaining int // choices not finished
	cached    int
	choices   []*choice
	err       *openai.Error // request failed (stream: error event already queued)
	// choice0 holds the first choice (most requests have one), in the
	// request's allocation next to its hot fields.
	choice0 choice

	id      string
	model   string
	created int64
	arrival time.Time

	// prompt accounting for usage
	promptTokens int

	wake chan struct{} // one slot: wakes coalesce

	// Set (then wake) by context.AfterFunc callbacks, so the handler waits
	// on wake alone.
	clientGone atomic.Bool
	ending     atomic.Bool
}

// choice is one completion of a request (one engine request). As in
// genRequest, the fields used for every streamed token come first.
type choice struct {
	r          *genRequest
	st         *outputproc.State
	lastOut    time.Time
	index      int
	textOffset int // characters streamed so far (legacy logprobs)
	finished   bool
	namedSent  bool
	namedTool  bool // named tool_choice read by tools: finish "stop"
	// afterReasoning: the constraint starts after the reasoning end.
	afterReasoning bool
	state          outputproc.State // st points here: same allocation

	echo      string // text to put before the first delta
	engineID  string
	promptIDs []int32

	// chat parsers
	reasoning ReasoningParser
	tools     toolparse.Parser
	named     string // named tool_choice, arguments only: the function
	toolIDGen func() string

	// non-streamed accumulation
	text      strings.Builder
	reason    strings.Builder
	calls     []openai.ToolCallDelta
	ids       []int32
	logprobs  []ipc.TokenLogprobs
	numTokens int
	finish    string
	stop      openai.StopReason
}

// Output implements engineclient.Sink; it runs on the engine's output
// goroutine.
func (ch *choice) Output(out *ipc.Output, now time.Time) bool {
	r := ch.r
	r.mu.Lock()
	if r.done || ch.finished {
		r.mu.Unlock()
		return false
	}
	if !r.firstSeen {
		r.firstSeen = true
		r.s.waiting.Add(-int64(len(r.choices)))
	}
	if ch.lastOut.IsZero() {
		r.s.metrics.ttft.Observe(now.Sub(r.arrival).Seconds())
		recordQueue(r.s.metrics, out.Events)
	} else if len(out.NewTokenIDs) > 0 {
		r.s.metrics.itl.Observe(now.Sub(ch.lastOut).Seconds())
	}
	ch.lastOut = now
	hold := r.stream && (len(r.buf) > chunkHeadroom || len(r.framed) > 0 || r.writing)
	d, abort := ch.st.Process(out, hold)
	wake := false
	if d != nil {
		// When the chunk can go straight to the socket, render it in a
		// pooled scratch buffer, which stays in this core's cache from one
		// token to the next, instead of the stream's own mailbox buffer,
		// whose lines 1024 streams have evicted since its last token.
		var scratch *[]byte
		var mailbox []byte
		if r.stream && !hold && r.directReady() {
			scratch = getBuf()
			mailbox, r.buf = r.buf, *scratch
		}
		ch.deliver(d)
		// Write from here when the socket takes it at once; otherwise (or
		// with no direct path) the handler goroutine writes. Held tokens
		// wake nobody.
		wake = !r.tryDirect()
		if scratch != nil {
			*scratch, r.buf = r.buf, mailbox
			if len(*scratch) > chunkHeadroom { // not written: the engine began lagging
				r.buf = append(r.buf, (*scratch)[chunkHeadroom:]...)
			}
			putBuf(scratch)
		}
	}
	r.mu.Unlock()
	if wake {
		r.signal()
	}
	return abort
}

// Prefetch implements engineclient.Prefetcher: stage 0 the choice's
// streaming fields, output state and chat parsers (up to text: the rest
// accumulates non-streamed responses), stage 1 the request's hot fields, stage
// 2 its chunk prefix: what Output reads first.
func (ch *choice) Prefetch(stage int) {
	switch stage {
	case 0:
		prefetch.Range(unsafe.Pointer(ch), unsafe.Offsetof(ch.text))
	case 1:
		r := ch.r
		prefetch.Range(unsafe.Pointer(r), unsafe.Offsetof(r.choice0))
	case 2:
		if p := ch.r.hdr.Prefix(); len(p) > 0 {
			prefetch.Range(unsafe.Pointer(unsafe.SliceData(p)), uintptr(len(p)))
		}
	}
}

// directReady reports whether tryDirect may write now (before the lagging
// check); r.mu is held.
func (r *genRequest) directReady() bool {
	return r.direct != nil && !r.writing && len(r.framed) == 0 && !r.terminated
}

// tryDirect writes the mailbox to a hijacked connection without blocking,
// on the engine's output goroutine, saving the handler goroutine's wake-up
// per chunk. It reports whether the handler can stay asleep: false when
// there is no direct path, the handler is writing, the socket took only
// part (the rest goes to r.framed for the handler), or the stream ended.
// r.mu is held.
func (r *genRequest) tryDirect() bool {
	if !r.directReady() {
		return false
	}
	if r.s.deps.Engines.Lagging(r.engine) {
		// Batches are queueing behind this one: spread the writes over the
		// handler goroutines (all cores) instead.
		return false
	}
	size := len(r.buf) - chunkHeadroom
	if size <= 0 && !r.done {
		return true
	}
	b := frameChunk(&r.buf, r.done)
	var n int
	var err error
	if r.fd >= 0 {
		n, err = sendNonBlocking(r.fd, b)
	} else {
		n, err = r.direct.tryWrite(b)
	}
	if r.done {
		r.terminated = true
	}
	if n > 0 {
		r.s.metrics.Chunks.Add(float64(r.events))
		r.s.metrics.Bytes.Add(float64(size))
		r.events = 0
	}
	if err != nil && !errors.Is(err, syscall.EAGAIN) {
		r.clientGone.Store(true)
		r.buf = r.buf[:chunkHeadroom]
		return false
	}
	if n < 0 {
		n = 0
	}
	if n < len(b) {
		r.framed = append(r.framed, b[n:]...)
		r.buf = r.buf[:chunkHeadroom]
		return false
	}
	r.buf = r.buf[:chunkHeadroom]
	return !r.done
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
	if !r.done && !ch.finished {
		if d := ch.st.Fail(reason); d != nil {
			ch.deliver(d)
		}
	}
	r.mu.Unlock()
	r.signal()
}

func (r *genRequest) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// deliver handles one emitted delta of ch; r.mu is held.
func (ch *choice) deliver(d *outputproc.Delta) {
	r := ch.r
	ch.numTokens = d.NumTokens
	if d.CachedTokens > r.cached {
		r.cached = d.CachedTokens
	}
	failed := d.Finished && d.FinishReason == ipc.FinishError
	finish := ""
	var stop openai.StopReason
	if d.Finished && !failed {
		finish = finishReason(d.FinishReason)
		stop = openai.StopReason{Token: d.StopReason.Token, Text: d.StopReason.Text, IsToken: d.StopReason.IsToken, IsText: d.StopReason.IsText}
	}
	if r.chat {
		ch.deliverChat(d, finish, stop)
	} else {
		ch.deliverCompletion(d, finish, stop)
	}
	if len(d.TokenIDs) > 1 {
		r.s.metrics.CoalescedTokens.Add(float64(len(d.TokenIDs) - 1))
	}
	if !d.Finished {
		return
	}
	ch.finished = true
	r.remaining--
	reason := finish
	if failed {
		reason = "error"
	}
	promptTokens := 0
	if ch.index%r.opts.N == 0 {
		promptTokens = len(ch.promptIDs) // once per prompt, not per choice
	}
	r.s.metrics.Finished(reason, promptTokens, d.NumTokens, time.Since(r.arrival).Seconds())
	if failed {
		r.fail(&openai.Error{Status: http.StatusInternalServerError, Type: "InternalServerError", Message: d.Error})
		return
	}
	if r.remaining == 0 {
		r.finishStream()
	}
}

// fail ends the request with e; r.mu is held.
func (r *genRequest) fail(e *openai.Error) {
	if r.done {
		return
	}
	r.err = e
	r.done = true
	if r.opts.Stream {
		b := openai.AppendErrorEvent(r.buf, e)
		r.buf = append(b, openai.Done...)
		r.events += 2
	}
}

// finishStream queues the usage chunk and [DONE]; r.mu is held.
func (r *genRequest) finishStream() {
	r.done = true
	if !r.opts.Stream {
		return
	}
	b := r.buf
	if r.opts.IncludeUsage {
		u := r.usage()
		b = openai.AppendUsageChunk(b, &r.hdr, &u)
		r.events++
	}
	r.buf = append(b, openai.Done...)
	r.events++
}

func (r *genRequest) usage() openai.Usage {
	u := openai.Usage{PromptTokens: r.promptTokens, CachedTokens: r.cached}
	for _, c := range r.choices {
		u.CompletionTokens += c.numTokens
	}
	return u
}

// chatContent runs the reasoning and tool parsers over delta text.
func (ch *choice) chatContent(text string, final bool) (content, reasoning string, calls []openai.ToolCallDelta) {
	content = text
	if ch.reasoning != nil {
		reasoning, content = ch.reasoning.Add(content)
		if final {
			r2, c2 := ch.reasoning.Finish()
			reasoning += r2
			content += c2
		}
	}
	switch {
	case ch.tools != nil:
		td := ch.tools.Add(content)
		content = td.Content
		calls = appendToolDeltas(calls, td.ToolCalls)
		if final {
			td = ch.tools.Finish()
			content += td.Content
			calls = appendToolDeltas(calls, td.ToolCalls)
		}
	case ch.named != "":
		if content != "" || (final && !ch.namedSent) {
			c := openai.ToolCallDelta{Index: 0, Arguments: content}
			if !ch.namedSent {
				c.ID, c.Name = ch.toolIDGen(), ch.named
				ch.namedSent = true
			}
			calls = append(calls, c)
		}
		content = ""
	}
	return content, reasoning, calls
}

func appendToolDeltas(dst []openai.ToolCallDelta, src []toolparse.ToolCallDelta) []openai.ToolCallDelta {
	for _, t := range src {
		dst = append(dst, openai.ToolCallDelta{Index: t.Index, ID: t.ID, Name: t.Name, Arguments: t.Arguments})
	}
	return dst
}

func (ch *choice) deliverChat(d *outputproc.Delta, finish string, stop openai.StopReason) {
	r := ch.r
	text := d.Text
	if d.First && ch.echo != "" {
		text = ch.echo + text
	}
	content, reasoning, calls := ch.chatContent(text, d.Finished)
	if finish == "stop" && ch.tools != nil && ch.tools.Called() && !ch.namedTool {
		finish = "tool_calls"
	}
	if !r.opts.Stream {
		ch.text.WriteString(content)
		ch.reason.WriteString(reasoning)
		ch.calls = mergeToolDeltas(ch.calls, calls)
		ch.ids = append(ch.ids, d.TokenIDs...)
		ch.logprobs = append(ch.logprobs, d.Logprobs...)
		if finish != "" {
			ch.finish, ch.stop = finish, stop
		}
		return
	}
	hasTokens := len(d.TokenIDs) > 0 && r.opts.Logprobs >= 0
	if !d.First && content == "" && reasoning == "" && len(calls) == 0 && finish == "" && !hasTokens {
		return // nothing to send (held back by a parser)
	}
	c := openai.ChatChoice{
		Index:          ch.index,
		Content:        content,
		HasContent:     content != "" || (d.First && len(calls) == 0 && reasoning == ""),
		Reasoning:      reasoning,
		HasReasoning:   reasoning != "",
		ReasoningField: r.s.cfg.ReasoningField,
		ToolCalls:      calls,
		FinishReason:   finish,
		StopReason:     stop,
	}
	if d.First {
		c.Role = "assistant"
	}
	var lp openai.Logprobs
	if r.opts.Logprobs >= 0 {
		lp = openai.Logprobs{TokenIDs: d.TokenIDs, Entries: d.Logprobs, Tok: r.s.deps.Tokenizer}
		c.Logprobs = &lp
	}
	var u *openai.Usage
	var uu openai.Usage
	if r.opts.ContinuousUsage {
		uu = openai.Usage{PromptTokens: len(ch.promptIDs), CompletionTokens: d.NumTokens, CachedTokens: d.CachedTokens}
		u = &uu
	}
	r.buf = openai.AppendChatChunk(r.buf, &r.hdr, &c, u)
	r.events++
}

// mergeToolDeltas folds streamed fragments into whole calls (non-streamed
// responses).
func mergeToolDeltas(dst, src []openai.ToolCallDelta) []openai.ToolCallDelta {
	for _, t := range src {
		found := false
		for i := range dst {
			if dst[i].Index == t.Index {
				dst[i].Arguments += t.Arguments
				if t.ID != "" {
					dst[i].ID = t.ID
				}
				if t.Name != "" {
					dst[i].Name = t.Name
				}
				found = true
				break
			}
		}
		if !found {
			dst = append(dst, t)
		}
	}
	return dst
}

func (ch *choice) deliverCompletion(d *outputproc.Delta, finish string, stop openai.StopReason) {
	r := ch.r
	text := d.Text
	if d.First && ch.echo != "" {
		text = ch.echo + text
	}
	if !r.stream {
		ch.text.WriteString(text)
		ch.ids = append(ch.ids, d.TokenIDs...)
		ch.logprobs = append(ch.logprobs, d.Logprobs...)
		if finish != "" {
			ch.finish, ch.stop = finish, stop
		}
		return
	}
	if text == "" && finish == "" && (r.logprobs < 0 || len(d.TokenIDs) == 0) {
		return
	}
	c := openai.CompletionChoice{Index: ch.index, Text: text, FinishReason: finish, StopReason: stop}
	var lp openai.Logprobs
	if r.logprobs >= 0 {
		lp = openai.Logprobs{TokenIDs: d.TokenIDs, Entries: d.Logprobs, Tok: r.s.deps.Tokenizer, TextOffset: ch.textOffset}
		c.Logprobs = &lp
	}
	ch.textOffset += utf8.RuneCountInString(text)
	var u *openai.Usage
	var uu openai.Usage
	if r.contUsage {
		uu = openai.Usage{PromptTokens: len(ch.promptIDs), CompletionTokens: d.NumTokens, CachedTokens: d.CachedTokens}
		u = &uu
	}
	r.buf = openai.AppendCompletionChunk(r.buf, &r.hdr, &c, u)
	r.events++
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
// response. The choices and options must be filled in.
func (s *Server) run(c *gin.Context, r *genRequest) {
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
	r.stream, r.contUsage, r.logprobs = r.opts.Stream, r.opts.ContinuousUsage, r.opts.Logprobs
	r.wake = make(chan struct{}, 1)
	if r.opts.Stream {
		r.buf = *getBuf()
	}
	r.remaining = len(r.choices)
	s.streams.Add(1)
	defer s.streams.Done()
	s.waiting.Add(int64(len(r.choices)))
	defer func() {
		r.mu.Lock()
		if !r.firstSeen {
			r.firstSeen = true
			s.waiting.Add(-int64(len(r.choices)))
		}
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
	if r.opts.Stream {
		s.stream(c, r)
	} else {
		s.wait(c, r)
	}
}

// abortChoices aborts the unfinished choices in the engine and reports how
// many there were.
func (s *Server) abortChoices(r *genRequest, chs []*choice) int {
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

// stream serves an SSE response from the request's mailbox.
func (s *Server) stream(c *gin.Context, r *genRequest) {
	s.metrics.StreamsOpen.Inc()
	defer s.metrics.StreamsOpen.Dec()
	w, err := startSSE(c, s.cfg.sndBuf, func() { r.clientGone.Store(true); r.signal() })
	if err != nil {
		return // client gone before the head was sent
	}
	defer w.close()
	if h, ok := w.(*hijackedSSE); ok && h.rc != nil {
		r.mu.Lock()
		r.direct, r.fd = h, h.fd
		r.mu.Unlock()
		r.signal() // write what arrived before the direct path existed
	}
	spare := getBuf()
	var framed []byte
	defer func() {
		// The mailbox's array goes back to the pool; spare's takes its
		// place for appends that still arrive.
		r.mu.Lock()
		*spare, r.buf = r.buf, (*spare)[:chunkHeadroom]
		r.direct, r.fd = nil, -1
		r.mu.Unlock()
		putBuf(spare)
	}()
	stopEnd := context.AfterFunc(s.endCtx, func() { r.ending.Store(true); r.signal() })
	defer stopEnd()
	ended := false
	for {
		<-r.wake
		if r.clientGone.Load() {
			return // run's defer aborts the engine requests
		}
		if !ended && r.ending.Load() {
			ended = true
			s.endRequest(r, "the server is shutting down")
		}
		r.mu.Lock()
		framed, r.framed = r.framed, framed[:0]
		*spare, r.buf = r.buf, (*spare)[:chunkHeadroom]
		out := spare
		n := r.events
		r.events = 0
		done := r.done
		last := done && !r.terminated
		if done {
			r.terminated = true
		}
		r.writing = true
		r.mu.Unlock()
		var werr error
		if len(framed) > 0 {
			werr = w.writeRaw(framed)
		}
		size := len(*out) - chunkHeadroom
		if werr == nil && (size > 0 || last) {
			werr = w.write(out, last)
			s.metrics.Chunks.Add(float64(n))
			s.metrics.Bytes.Add(float64(size))
		}
		r.mu.Lock()
		r.writing = false
		more := len(r.buf) > chunkHeadroom || len(r.framed) > 0 || (r.done && !r.terminated)
		r.mu.Unlock()
		if werr != nil || (done && !more) {
			return
		}
		if more {
			r.signal() // appended while we wrote
		}
	}
}

// endRequest flushes every choice's pending text and ends the request with
// an error (shutdown timeout).
func (s *Server) endRequest(r *genRequest, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	for _, ch := range r.choices {
		if !ch.finished {
			if d := ch.st.Pending(); d != nil {
				d2 := *d
				d2.Finished = false
				ch.deliver(&d2)
			}
		}
	}
	r.fail(openai.NewError(http.StatusServiceUnavailable, "%s", msg))
}

// wait serves a non-streamed response once every choice has finished.
func (s *Server) wait(c *gin.Context, r *genRequest) {
	stopGone := context.AfterFunc(c.Request.Context(), func() { r.clientGone.Store(true); r.signal() })
	defer stopGone()
	stopEnd := context.AfterFunc(s.endCtx, func() { r.ending.Store(true); r.signal() })
	defer stopEnd()
	ended := false
	for {
		<-r.wake
		if r.clientGone.Load() {
			return
		}
		if !ended && r.ending.Load() {
			ended = true
			s.endRequest(r, "the server is shutting down")
		}
		r.mu.Lock()
		done, e := r.done, r.err
		r.mu.Unlock()
		if !done {
			continue
		}
		if e != nil {
			writeError(c, e)
			return
		}
		r.mu.Lock()
		body := r.responseJSON()
		r.mu.Unlock()
		c.Data(http.StatusOK, "application/json", body)
		return
	}
}
