// Package openai holds the OpenAI-compatible protocol of the frontend: the
// request bodies of /v1/completions and /v1/chat/completions with their
// validation (every rejection names the offending field), the error body,
// the non-streamed response shapes, and hand-written appenders that render
// streamed SSE chunks without encoding/json or fmt on the per-token path.
//
// Shapes follow vLLM's OpenAI server (see docs/design/vllm-notes.md §4):
// null fields are written as null, never "", every chunk carries one choice,
// and the final chunk of a choice carries finish_reason and stop_reason.
package openai
