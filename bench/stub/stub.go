// Package stub is a stand-alone OpenAI-compatible streaming server with
// scripted timing and faults. It has no model: every request streams its
// max_tokens tokens as " tok" words on a fixed schedule. The benchmark tests
// run it under httptest, and `bench stub-server` serves it so the client's
// own CPU cost can be measured from a separate process.
package stub

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// FaultKind selects how a request misbehaves.
type FaultKind int

// Fault kinds.
const (
	// NoFault streams normally.
	NoFault FaultKind = iota
	// HTTPError answers 500 with an OpenAI error body before streaming.
	HTTPError
	// StreamError sends After chunks, then `data: {"error":…}` and
	// `data: [DONE]` under status 200, as vLLM does for mid-stream errors.
	StreamError
	// Drop sends After chunks, then cuts the connection without finishing
	// the chunked body.
	Drop
	// Empty answers 200 with only `data: [DONE]`.
	Empty
)

// Fault is the behaviour of one request.
type Fault struct {
	Kind FaultKind
	// After is how many token chunks go out before a StreamError or Drop.
	After int
}

// Options script the server.
type Options struct {
	// FirstDelay is the time from receiving a request to its first chunk.
	FirstDelay time.Duration
	// Interval is the time between later chunks.
	Interval time.Duration
	// TokensPerChunk is how many tokens each chunk carries (default 1).
	TokensPerChunk int
	// ReasoningChunks makes the first chat chunks carry "reasoning" deltas
	// instead of "content".
	ReasoningChunks int
	// NoUsage omits the usage chunk even when the request asks for it.
	NoUsage bool
	// Fault, when set, picks the behaviour of the i-th request (from 0, in
	// arrival order).
	Fault func(i int) Fault
}

// Server serves /v1/completions, /v1/chat/completions and /v1/models.
type Server struct {
	opts Options
	next atomic.Int64 // arrival counter for Fault
}

// New returns a Server.
func New(o Options) *Server {
	if o.TokensPerChunk < 1 {
		o.TokensPerChunk = 1
	}
	return &Server{opts: o}
}

// request is the part of a request body the stub reads.
type request struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            json.RawMessage `json:"messages"`
	MaxTokens           int             `json:"max_tokens"`
	MaxCompletionTokens int             `json:"max_completion_tokens"`
	StreamOptions       struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"stub-model","object":"model","root":"stub-model"}]}`))
		return
	case "/v1/completions", "/v1/chat/completions":
	default:
		http.NotFound(w, r)
		return
	}
	start := time.Now()
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "decode request: "+err.Error())
		return
	}
	chat := r.URL.Path == "/v1/chat/completions"
	n := req.MaxTokens
	if chat && req.MaxCompletionTokens > 0 {
		n = req.MaxCompletionTokens
	}
	if n <= 0 {
		n = 16
	}
	fault := Fault{}
	if s.opts.Fault != nil {
		fault = s.opts.Fault(int(s.next.Add(1) - 1))
	}
	if fault.Kind == HTTPError {
		writeError(w, http.StatusInternalServerError, "stub: injected failure")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	if fault.Kind == Empty {
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
		return
	}
	promptTokens := countPrompt(req.Prompt, req.Messages)
	k := s.opts.TokensPerChunk
	chunks := (n + k - 1) / k
	buf := make([]byte, 0, 512)
	sent := 0
	for c := 0; c < chunks; c++ {
		wait := time.Until(start.Add(s.opts.FirstDelay + time.Duration(c)*s.opts.Interval))
		if wait > 0 {
			time.Sleep(wait)
		}
		if r.Context().Err() != nil {
			return
		}
		if (fault.Kind == StreamError || fault.Kind == Drop) && c == fault.After {
			if fault.Kind == Drop {
				flush()
				panic(http.ErrAbortHandler) // net/http cuts the connection
			}
			_, _ = w.Write([]byte("data: {\"error\":{\"message\":\"stub: injected stream failure\",\"type\":\"InternalServerError\",\"param\":null,\"code\":500}}\n\ndata: [DONE]\n\n"))
			return
		}
		toks := min(k, n-sent)
		sent += toks
		buf = buf[:0]
		if chat && c == 0 {
			buf = append(buf, `data: {"id":"chatcmpl-stub","object":"chat.completion.chunk","model":"stub-model","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
		}
		buf = appendChunk(buf, chat, c < s.opts.ReasoningChunks, toks, sent == n)
		if _, err := w.Write(buf); err != nil {
			return
		}
		flush()
	}
	buf = buf[:0]
	if req.StreamOptions.IncludeUsage && !s.opts.NoUsage {
		buf = append(buf, `data: {"id":"stub","choices":[],"usage":{"prompt_tokens":`...)
		buf = strconv.AppendInt(buf, int64(promptTokens), 10)
		buf = append(buf, `,"completion_tokens":`...)
		buf = strconv.AppendInt(buf, int64(n), 10)
		buf = append(buf, `,"total_tokens":`...)
		buf = strconv.AppendInt(buf, int64(promptTokens+n), 10)
		buf = append(buf, "}}\n\n"...)
	}
	buf = append(buf, "data: [DONE]\n\n"...)
	_, _ = w.Write(buf)
}

// appendChunk appends one SSE event carrying toks tokens.
func appendChunk(buf []byte, chat, reasoning bool, toks int, last bool) []byte {
	if chat {
		buf = append(buf, `data: {"id":"chatcmpl-stub","object":"chat.completion.chunk","model":"stub-model","choices":[{"index":0,"delta":{"`...)
		if reasoning {
			buf = append(buf, "reasoning"...)
		} else {
			buf = append(buf, "content"...)
		}
		buf = append(buf, `":"`...)
	} else {
		buf = append(buf, `data: {"id":"cmpl-stub","object":"text_completion","model":"stub-model","choices":[{"index":0,"text":"`...)
	}
	for range toks {
		buf = append(buf, " tok"...)
	}
	buf = append(buf, `"`...)
	if chat {
		buf = append(buf, '}')
	}
	if last {
		buf = append(buf, `,"logprobs":null,"finish_reason":"length"}]}`+"\n\n"...)
	} else {
		buf = append(buf, `,"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	}
	return buf
}

// countPrompt returns the prompt's token count: the id count for a list of
// ids, else one per whitespace-separated word.
func countPrompt(prompt, messages json.RawMessage) int {
	var ids []int
	if json.Unmarshal(prompt, &ids) == nil && len(ids) > 0 {
		return len(ids)
	}
	var text string
	if json.Unmarshal(prompt, &text) != nil {
		var msgs []struct {
			Content string `json:"content"`
		}
		_ = json.Unmarshal(messages, &msgs)
		for _, m := range msgs {
			text += " " + m.Content
		}
	}
	n, inWord := 0, false
	for _, c := range []byte(text) {
		space := c == ' ' || c == '\n' || c == '\t'
		if !space && !inWord {
			n++
		}
		inWord = !space
	}
	return n
}

// writeError writes an OpenAI error body.
func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": http.StatusText(code), "param": nil, "code": code}})
	_, _ = w.Write(b)
}
