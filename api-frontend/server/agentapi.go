package server

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluice-llm/sluice/api-frontend/anthropic"
	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/api-frontend/render"
	"github.com/sluice-llm/sluice/api-frontend/sse"
)

// apiSurface is how a surface mapped onto chat (Responses, Messages) runs
// through serveChat.
type apiSurface struct {
	// prefix replaces "chatcmpl-" in the response id; toolPrefix starts
	// tool call ids.
	prefix, toolPrefix string
	// clamp: max_tokens is clamped to the context left after the prompt
	// (Messages) instead of failing.
	clamp bool
	// newRenderer returns the request's renderer.
	newRenderer func(id, model string, created int64) render.Renderer
	// done runs after the response was served (storing it).
	done func(r *stream)
	// ping, when set, appends a keep-alive event for a stream still
	// waiting for its first output (a long prefill); promptTokens is the
	// prompt's length.
	ping func(dst []byte, promptTokens int) []byte
}

// pingEvery is how often a queued stream with a ping gets one.
const pingEvery = time.Second

// pingWhileQueued sends api.ping every pingEvery while r has no output
// yet; the returned function stops it.
func (s *Server) pingWhileQueued(r *stream, ping func([]byte, int) []byte) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(pingEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			r.mu.Lock()
			queued := r.state == stateQueued && len(r.buf) >= sse.Headroom
			if queued {
				r.buf = ping(r.buf, r.promptTokens)
				r.events++
			}
			r.mu.Unlock()
			if !queued {
				return
			}
			r.signal()
		}
	}()
	return func() { close(done) }
}

// ginAPIKey is the gin context key naming the API surface of a request
// whose errors are not OpenAI-shaped.
const ginAPIKey = "sluice.api"

// markMessages makes errors on a route Anthropic-shaped.
func markMessages(c *gin.Context) { c.Set(ginAPIKey, "messages") }

// clampMaxTokens lowers max_tokens to the context left after the prompt
// (Anthropic clients send 32 000 or more regardless of the model).
func clampMaxTokens(o *openai.Options, maxModelLen, promptLen int) {
	if maxModelLen <= 0 {
		return
	}
	left := int32(maxModelLen - promptLen)
	if left >= 1 && (o.Params.MaxTokens == 0 || o.Params.MaxTokens > left) {
		o.Params.MaxTokens = left
	}
}

// writeAPIError writes e in the shape of the request's API surface.
func writeAPIError(c *gin.Context, e *openai.Error) {
	if c.GetString(ginAPIKey) == "messages" {
		c.Data(e.Status, "application/json", anthropic.AppendError(nil, e))
		return
	}
	c.Data(e.Status, "application/json", e.AppendJSON(nil))
}

// notFound is a 404 in the request's API shape.
func notFound(c *gin.Context, format string, args ...any) {
	writeError(c, openai.NewError(http.StatusNotFound, format, args...))
}
