// Package outputproc is the frontend's output processor (the role vLLM's
// OutputProcessor plays): it turns the engine's per-step token ids of one
// completion into typed deltas, the same for every API surface. It is
// frontend-only: engine-core never imports it (internal/importrules), and
// the text machinery both programs share lives in text/ and constraint/.
//
// For each completion (each child of an n>1 request) a Processor runs, on
// the frontend's output goroutine:
//
//	detokenizer (detok: incremental, holding back partial UTF-8)
//	→ stop strings (stopstr: holding back only a tail that may still become
//	  a stop string; a hit asks the caller to ABORT the request in the engine)
//	→ stream interval (State: coalescing)
//	→ reasoning parser (reasoning) → tool parser (toolparse)
//	→ Delta: content, reasoning, tool-call fragments, token ids and
//	  logprobs, finish (reason, stop reason, error), usage.
//
// The parsers run on the coalesced text of each emitted delta, so they see
// multi-token deltas and must not assume one token per delta. A renderer
// (api-frontend/render) turns Deltas into one API's bytes; Accumulator folds
// them for non-streamed responses.
//
// Stream interval (--stream-interval N, per-request stream_interval): the
// first token(s) go at once; then a delta is emitted when at least N tokens
// are pending; on finish, or on any error, everything pending is flushed.
// A caller whose client is slow may also hold emission back (Process's hold
// argument): pending tokens then merge into the next delta, so backpressure
// never reaches the engine; PendingBytes tells the caller what that holds,
// so it can bound it.
//
// The package is pure: no sockets, no HTTP, no clock. A Processor (or
// State) is not safe for concurrent use; exactly one goroutine owns it at a
// time.
package outputproc
