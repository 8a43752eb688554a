// Package render turns the output processor's typed deltas
// (outputproc.Delta) into the bytes of one API surface. It is pure: no
// sockets, no HTTP, no clock. A token's way through the frontend is
//
//	engine batch → outputproc.Processor (per completion) → outputproc.Delta
//	→ Renderer (per request, this package) → SSE bytes → stream (server) → socket
//
// # Adding an API surface
//
// A new surface (OpenAI Responses, Anthropic Messages, …) is two pieces and
// touches neither the processor nor the stream:
//
//  1. A request mapper, in the surface's own package or handler: validate
//     the body (errors in the API's own error shape, 4xx) and map it to the
//     engine request every surface shares: prompt token ids, ipc.Params and
//     the outputproc.Options of each completion (stop strings, parsers,
//     echo).
//  2. A Renderer, in a file of this package beside chat.go and
//     completions.go: AppendDelta renders one delta as zero or more SSE
//     events (the renderer keeps whatever per-request state its API needs,
//     e.g. Responses' output-item indices or Messages' content-block
//     open/close), AppendEnd the closing events (usage, [DONE] or the API's
//     terminal event), AppendError a mid-stream failure, and Body the
//     non-streamed response from the completions' outputproc.Accumulator.
//
// The server's stream owns the socket and calls the Renderer under its
// lock, in order, on whichever goroutine delivers the delta; a Renderer is
// therefore never called concurrently and may keep state without locks.
//
// The appenders (AppendChatChunk, AppendCompletionChunk, …) are
// hand-written so the per-token path uses neither encoding/json nor fmt;
// testdata/stream.golden pins their bytes.
package render
