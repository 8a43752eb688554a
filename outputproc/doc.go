// Package outputproc holds the frontend's per-request output state: it turns
// the engine's per-step token ids into text deltas ready to stream.
//
// For each completion (each child of an n>1 request) a State runs, on the
// frontend's output goroutine, the pipeline of ARCHITECTURE.md: incremental
// detokenization (detok, holding back partial UTF-8) → stop strings (stopstr,
// holding back only a tail that may still become a stop string; a hit asks the
// caller to ABORT the request in the engine) → stream interval. Reasoning and
// tool parsers run on the deltas a State emits, so they always see
// multi-token deltas and must not assume one token per delta.
//
// Stream interval (--stream-interval N, per-request stream_interval): the
// first token(s) go at once; then a delta is emitted when at least N tokens
// are pending; on finish, or on any error, everything pending is flushed.
// A caller whose client is slow may also hold emission back (Process's hold
// argument): pending tokens then merge into the next delta, so backpressure
// never reaches the engine.
//
// A State is not safe for concurrent use; exactly one goroutine owns it.
package outputproc
