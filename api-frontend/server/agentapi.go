package server

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/sluice-llm/sluice/api-frontend/anthropic"
	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/api-frontend/render"
	"github.com/sluice-llm/sluice/outputproc"
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
	// newRenderer returns the request's renderer (r.id and r.model set).
	newRenderer func(r *genRequest) render.Renderer
	// done runs after the response was served (storing it).
	done func(r *genRequest)
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

// apiEvents counts the events a renderer appended (for /metrics).
func apiEvents(r render.Renderer) int {
	if e, ok := r.(interface{ Events() int }); ok {
		return e.Events()
	}
	return 1
}

// apiUsage is the request's usage in outputproc's terms; r.mu is held.
func (r *genRequest) apiUsage() outputproc.Usage {
	u := r.usage()
	return outputproc.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, CachedTokens: u.CachedTokens}
}

// finishOf maps chat's finish spelling back to the neutral reason.
func finishOf(finish string) outputproc.FinishReason {
	switch finish {
	case "":
		return outputproc.FinishNone
	case "length":
		return outputproc.FinishLength
	case "tool_calls":
		return outputproc.FinishToolCalls
	case "abort":
		return outputproc.FinishAbort
	}
	return outputproc.FinishStop
}

// deliverAPI hands one parsed delta to the request's API renderer (stream)
// or accumulator (non-streamed); r.mu is held.
func (ch *choice) deliverAPI(d *outputproc.TextDelta, content, reasoning string, calls []render.ToolCallDelta, finish string, stop render.StopReason) {
	r := ch.r
	od := outputproc.Delta{
		Index:     ch.index,
		First:     d.First,
		Content:   content,
		Reasoning: reasoning,
		TokenIDs:  d.TokenIDs,
		Finish: outputproc.Finish{Reason: finishOf(finish), Stop: outputproc.StopReason{
			Token: stop.Token, Text: stop.Text, IsToken: stop.IsToken, IsText: stop.IsText}},
		Usage: outputproc.Usage{PromptTokens: len(ch.promptIDs), CompletionTokens: d.NumTokens, CachedTokens: d.CachedTokens},
	}
	for _, c := range calls {
		od.ToolCalls = append(od.ToolCalls, outputproc.ToolCallDelta{Index: c.Index, ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	if !r.opts.Stream {
		r.apiAcc.Add(&od)
		return
	}
	r.buf = r.api.AppendDelta(r.buf, &od)
	r.events += apiEvents(r.api)
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
