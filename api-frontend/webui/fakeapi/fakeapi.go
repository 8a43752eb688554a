// Package fakeapi is a scripted stand-in for Sluice's OpenAI-compatible
// server, for developing and testing the web UI without an engine: it
// streams /v1/chat/completions and /v1/completions in the real SSE shapes
// (role chunk, content deltas at a fixed interval coalesced by
// stream_interval, tool-call and reasoning deltas, usage chunks, mid-stream
// error events), /v1/responses and /v1/messages in their named-event shapes
// (one delta event a token), lists /v1/models, keeps the same Prometheus metrics as the
// real frontend and serves them as webui.Stats.
//
// What a request gets is chosen by words in its last message or prompt:
//
//	"weather" (with tools)  a streamed call of the first tool, arguments in fragments
//	"think"                 reasoning deltas (delta.reasoning) before the content
//	"fail"                  a mid-stream error event after a few tokens
//	"refuse"                an HTTP 400 error before the stream
//
// Otherwise it streams max_tokens (default 64) words of filler text.
package fakeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-llm/sluice/api-frontend/webui"
)

// Config is the fake server's behaviour.
type Config struct {
	// Model is the one model /v1/models lists.
	Model string
	// TokenInterval is the time between generated tokens.
	TokenInterval time.Duration
	// FirstTokenDelay is the time before the first token (the "prefill").
	FirstTokenDelay time.Duration
	// APIKey, when set, is required as a Bearer token on /v1/.
	APIKey string
	// MaxRunning bounds running requests; beyond it they wait (0: 4).
	MaxRunning int
	// UIDir, when set, serves the UI bundle from this directory (webui.Options.Dir).
	UIDir string
}

// Server is the fake; it is an http.Handler serving /v1/, /metrics and, through
// webui.Handler, /ui/.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	reg     *prometheus.Registry
	slots   chan struct{}
	running atomic.Int64
	waiting atomic.Int64
	genTok  atomic.Uint64
	prmTok  atomic.Uint64
	nextID  atomic.Uint64

	mRunning, mWaiting, mKV     *prometheus.GaugeVec
	mPrefixQ, mPrefixH          *prometheus.CounterVec
	mUp                         *prometheus.GaugeVec
	mTTFT, mITL, mE2E           prometheus.Histogram
	mPrompt, mGen               prometheus.Counter
	mSuccess                    *prometheus.CounterVec
	mStreams                    prometheus.Gauge
	mChunks, mBytes, mCoalesced prometheus.Counter
}

// New makes a fake server.
func New(cfg Config) *Server {
	if cfg.Model == "" {
		cfg.Model = "demo"
	}
	if cfg.MaxRunning <= 0 {
		cfg.MaxRunning = 4
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), reg: prometheus.NewRegistry(), slots: make(chan struct{}, cfg.MaxRunning)}
	eng := []string{"engine"}
	s.mRunning = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:num_requests_running", Help: "Running requests."}, eng)
	s.mWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:num_requests_waiting", Help: "Waiting requests."}, eng)
	s.mKV = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:kv_cache_usage_perc", Help: "KV-cache usage."}, eng)
	s.mPrefixQ = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:prefix_cache_queries_total", Help: "Prefix cache queries."}, eng)
	s.mPrefixH = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:prefix_cache_hits_total", Help: "Prefix cache hits."}, eng)
	s.mUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_frontend_engine_up", Help: "Engine up."}, eng)
	s.mTTFT = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vllm:time_to_first_token_seconds", Help: "TTFT.",
		Buckets: []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0}})
	s.mITL = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vllm:inter_token_latency_seconds", Help: "ITL.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0}})
	s.mE2E = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vllm:e2e_request_latency_seconds", Help: "E2E.",
		Buckets: []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0}})
	s.mPrompt = prometheus.NewCounter(prometheus.CounterOpts{Name: "vllm:prompt_tokens_total", Help: "Prompt tokens."})
	s.mGen = prometheus.NewCounter(prometheus.CounterOpts{Name: "vllm:generation_tokens_total", Help: "Generated tokens."})
	s.mSuccess = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total", Help: "Finished requests."}, []string{"finished_reason"})
	s.mStreams = prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_frontend_streams_open", Help: "Open streams."})
	s.mChunks = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_frontend_sse_chunks_total", Help: "Chunks."})
	s.mBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_frontend_sse_bytes_total", Help: "Bytes."})
	s.mCoalesced = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_frontend_coalesced_tokens_total", Help: "Coalesced tokens."})
	s.reg.MustRegister(s.mRunning, s.mWaiting, s.mKV, s.mPrefixQ, s.mPrefixH, s.mUp, s.mTTFT, s.mITL, s.mE2E,
		s.mPrompt, s.mGen, s.mSuccess, s.mStreams, s.mChunks, s.mBytes, s.mCoalesced)
	s.mUp.WithLabelValues("0").Set(1)
	s.mRunning.WithLabelValues("0").Set(0)
	s.mWaiting.WithLabelValues("0").Set(0)
	s.mKV.WithLabelValues("0").Set(0)
	s.mPrefixQ.WithLabelValues("0")
	s.mPrefixH.WithLabelValues("0")

	s.mux.HandleFunc("GET /v1/models", s.auth(s.models))
	s.mux.HandleFunc("POST /v1/chat/completions", s.auth(s.generate(true)))
	s.mux.HandleFunc("POST /v1/completions", s.auth(s.generate(false)))
	s.mux.HandleFunc("POST /v1/responses", s.auth(s.agentAPI(false)))
	s.mux.HandleFunc("POST /v1/messages", s.auth(s.agentAPI(true)))
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	ui := webui.Handler(webui.Options{Stats: func() any { return s.Stats() }, APIKeyRequired: cfg.APIKey != "", Dir: cfg.UIDir})
	s.mux.Handle("/ui", ui)
	s.mux.Handle("/ui/", ui)
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) })
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Running is the number of requests generating now.
func (s *Server) Running() int64 { return s.running.Load() }

// Stats are the live figures in the web UI's shape.
func (s *Server) Stats() webui.Stats {
	st, err := webui.FromGatherer(s.reg, s.cfg.Model, "fake-0")
	if err != nil {
		st = webui.Stats{Model: s.cfg.Model}
	}
	for i := range st.Engines {
		st.Engines[i].GeneratedTokens = s.genTok.Load()
		st.Engines[i].PromptTokens = s.prmTok.Load()
		st.Engines[i].StepTimeMicros = s.cfg.TokenInterval.Microseconds()
	}
	return st
}

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+s.cfg.APIKey {
			writeError(w, http.StatusUnauthorized, "authentication_error", "", "invalid or missing API key")
			return
		}
		h(w, r)
	}
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []any{
		map[string]any{"id": s.cfg.Model, "object": "model", "created": 0, "owned_by": "sluice", "root": s.cfg.Model, "max_model_len": 4096},
	}})
}

func writeError(w http.ResponseWriter, status int, typ, param, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var p any
	if param != "" {
		p = param
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": p, "code": status}})
}

// request is the part of a completion request the fake reads.
type request struct {
	Model         string          `json:"model"`
	Messages      []message       `json:"messages"`
	Prompt        json.RawMessage `json:"prompt"`
	Stream        bool            `json:"stream"`
	MaxTokens     *int            `json:"max_tokens"`
	MaxCompTokens *int            `json:"max_completion_tokens"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	Seed          *int64          `json:"seed"`
	Stop          json.RawMessage `json:"stop"`
	StreamIntvl   *int            `json:"stream_interval"`
	Tools         []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	StreamOptions *struct {
		IncludeUsage         bool `json:"include_usage"`
		ContinuousUsageStats bool `json:"continuous_usage_stats"`
	} `json:"stream_options"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text is the request's last message or prompt as plain text.
func (q *request) text() string {
	var raw json.RawMessage
	if len(q.Messages) > 0 {
		raw = q.Messages[len(q.Messages)-1].Content
	} else {
		raw = q.Prompt
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func (q *request) stops() []string {
	var one string
	if json.Unmarshal(q.Stop, &one) == nil && one != "" {
		return []string{one}
	}
	var many []string
	_ = json.Unmarshal(q.Stop, &many)
	return many
}

// validate returns the offending parameter and message, or "", "".
func (q *request) validate(model string) (string, string) {
	switch {
	case q.Model != "" && q.Model != model:
		return "model", fmt.Sprintf("The model `%s` does not exist.", q.Model)
	case q.MaxTokens != nil && *q.MaxTokens < 1:
		return "max_tokens", fmt.Sprintf("max_tokens must be at least 1, got %d.", *q.MaxTokens)
	case q.Temperature != nil && (*q.Temperature < 0 || *q.Temperature > 2):
		return "temperature", fmt.Sprintf("temperature must be in [0, 2], got %g.", *q.Temperature)
	case q.TopP != nil && (*q.TopP <= 0 || *q.TopP > 1):
		return "top_p", fmt.Sprintf("top_p must be in (0, 1], got %g.", *q.TopP)
	case q.StreamIntvl != nil && *q.StreamIntvl < 1:
		return "stream_interval", fmt.Sprintf("stream_interval must be >= 1, got %d", *q.StreamIntvl)
	}
	return "", ""
}

// filler is the text generated tokens are drawn from, one word a token.
var filler = strings.Fields(`Sluice streams tokens from the engine to the client as server-sent events.
The first token goes out at once; later tokens are grouped by the stream interval,
so a larger interval means fewer, larger chunks and less work per token. Each
chunk carries a delta of text, and the last one carries the finish reason.`)

// piece is one step's output: content, reasoning or a tool-call fragment.
type piece struct {
	content, reasoning string
	toolName, toolArgs string
	toolStart          bool
}

// script is what a request generates, token by token.
func (s *Server) script(q *request, maxTokens int) (steps []piece, failAfter int) {
	t := strings.ToLower(q.text())
	failAfter = -1
	if strings.Contains(t, "think") {
		for _, w := range strings.Fields("The user wants me to think first. I will reason briefly, then answer.") {
			steps = append(steps, piece{reasoning: w + " "})
		}
	}
	if strings.Contains(t, "weather") && len(q.Tools) > 0 {
		name := q.Tools[0].Function.Name
		steps = append(steps, piece{toolStart: true, toolName: name})
		for _, f := range []string{`{"`, `city`, `": "`, `Par`, `is`, `", "`, `unit`, `": "`, `celsius`, `"}`} {
			steps = append(steps, piece{toolArgs: f})
		}
		return steps, failAfter
	}
	for i := 0; len(steps) < maxTokens; i++ {
		w := filler[i%len(filler)]
		if i > 0 {
			w = " " + w
		}
		steps = append(steps, piece{content: w})
	}
	if strings.Contains(t, "fail") {
		failAfter = min(5, len(steps)-1)
	}
	if len(steps) > maxTokens {
		steps = steps[:maxTokens]
	}
	return steps, failAfter
}

func (s *Server) generate(chat bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var q request
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&q); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "", "invalid JSON body: "+err.Error())
			return
		}
		if p, msg := q.validate(s.cfg.Model); p != "" {
			status := http.StatusBadRequest
			if p == "model" {
				status = http.StatusNotFound
			}
			writeError(w, status, "invalid_request_error", p, msg)
			return
		}
		if strings.Contains(strings.ToLower(q.text()), "refuse") {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "messages", "the fake server refuses prompts that say refuse")
			return
		}
		if !q.Stream {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "stream", "the fake server only streams (set stream: true)")
			return
		}
		maxTokens := 64
		if q.MaxTokens != nil {
			maxTokens = *q.MaxTokens
		} else if q.MaxCompTokens != nil {
			maxTokens = *q.MaxCompTokens
		}
		s.stream(w, r, &q, chat, maxTokens)
	}
}

// stream runs one request to its end or the client's disconnect.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, q *request, chat bool, maxTokens int) {
	ctx := r.Context()
	start := time.Now()
	promptTokens := len(strings.Fields(q.text())) + 8
	s.waiting.Add(1)
	s.mWaiting.WithLabelValues("0").Set(float64(s.waiting.Load()))
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		s.waiting.Add(-1)
		s.mWaiting.WithLabelValues("0").Set(float64(s.waiting.Load()))
		return
	}
	s.waiting.Add(-1)
	s.running.Add(1)
	s.gauges()
	s.mStreams.Inc()
	defer func() {
		<-s.slots
		s.running.Add(-1)
		s.gauges()
		s.mStreams.Dec()
	}()
	s.mPrefixQ.WithLabelValues("0").Add(float64(promptTokens))
	s.mPrefixH.WithLabelValues("0").Add(float64(promptTokens / 2))
	s.prmTok.Add(uint64(promptTokens))

	interval := 1
	if q.StreamIntvl != nil {
		interval = *q.StreamIntvl
	}
	steps, failAfter := s.script(q, maxTokens)
	stops := q.stops()
	e := &emitter{w: w, s: s, chat: chat, model: s.cfg.Model, created: start.Unix(),
		id:     fmt.Sprintf("%s-fake%d", map[bool]string{true: "chatcmpl", false: "cmpl"}[chat], s.nextID.Add(1)),
		prompt: promptTokens}
	if q.StreamOptions != nil {
		e.usage, e.continuous = q.StreamOptions.IncludeUsage, q.StreamOptions.ContinuousUsageStats
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	http.NewResponseController(w).Flush() //nolint:errcheck // a failed flush shows up as a failed write

	if !sleep(ctx, s.cfg.FirstTokenDelay) {
		s.finish("abort", promptTokens, 0, start)
		return
	}
	var pending []piece
	var text strings.Builder
	finish, generated, last := "length", 0, time.Now()
	for i, p := range steps {
		if i > 0 && !sleep(ctx, s.cfg.TokenInterval) {
			s.finish("abort", promptTokens, generated, start)
			return
		}
		now := time.Now()
		if i == 0 {
			s.mTTFT.Observe(now.Sub(start).Seconds())
		} else {
			s.mITL.Observe(now.Sub(last).Seconds())
		}
		last = now
		generated++
		s.genTok.Add(1)
		if i == failAfter {
			e.flush(pending, generated-1, "")
			e.errorEvent("the fake engine failed mid-stream (the prompt asked it to fail)")
			s.finish("error", promptTokens, generated, start)
			return
		}
		text.WriteString(p.content)
		pending = append(pending, p)
		hit := false
		for _, st := range stops {
			if st != "" && strings.Contains(text.String(), st) {
				hit = true
			}
		}
		if hit {
			finish = "stop"
			pending = pending[:len(pending)-1] // the stop string is not sent
			break
		}
		if i == len(steps)-1 {
			break // the last token goes with the finish reason
		}
		if i == 0 || len(pending) >= interval {
			if !e.flush(pending, generated, "") {
				s.finish("abort", promptTokens, generated, start)
				return
			}
			pending = pending[:0]
		}
	}
	if len(steps) > 0 && steps[len(steps)-1].toolArgs != "" {
		finish = "tool_calls"
	} else if finish == "length" && len(steps) < maxTokens {
		finish = "stop"
	}
	e.flush(pending, generated, finish)
	if e.usage {
		e.usageChunk(generated)
	}
	e.done()
	s.finish(finish, promptTokens, generated, start)
}

func (s *Server) gauges() {
	run := s.running.Load()
	s.mRunning.WithLabelValues("0").Set(float64(run))
	s.mWaiting.WithLabelValues("0").Set(float64(s.waiting.Load()))
	s.mKV.WithLabelValues("0").Set(float64(run) / float64(2*s.cfg.MaxRunning))
}

func (s *Server) finish(reason string, prompt, gen int, start time.Time) {
	s.mSuccess.WithLabelValues(reason).Inc()
	s.mPrompt.Add(float64(prompt))
	s.mGen.Add(float64(gen))
	s.mE2E.Observe(time.Since(start).Seconds())
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// emitter writes one stream's SSE events.
type emitter struct {
	w                 http.ResponseWriter
	s                 *Server
	chat              bool
	id, model         string
	created           int64
	prompt            int
	usage, continuous bool
	roleSent          bool
}

func (e *emitter) write(v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	n, err := fmt.Fprintf(e.w, "data: %s\n\n", b)
	if err != nil {
		return false
	}
	e.s.mChunks.Inc()
	e.s.mBytes.Add(float64(n))
	return http.NewResponseController(e.w).Flush() == nil
}

func (e *emitter) base() map[string]any {
	obj := "text_completion"
	if e.chat {
		obj = "chat.completion.chunk"
	}
	return map[string]any{"id": e.id, "object": obj, "created": e.created, "model": e.model}
}

func (e *emitter) usageOf(gen int) map[string]any {
	return map[string]any{"prompt_tokens": e.prompt, "completion_tokens": gen, "total_tokens": e.prompt + gen}
}

// flush sends the pending pieces as one chunk (several tool fragments or
// content deltas merge), with finish when not "".
func (e *emitter) flush(pending []piece, gen int, finish string) bool {
	if len(pending) == 0 && finish == "" {
		return true
	}
	if len(pending) > 1 {
		e.s.mCoalesced.Add(float64(len(pending) - 1))
	}
	var content, reasoning, args strings.Builder
	var start *piece
	for i := range pending {
		p := &pending[i]
		content.WriteString(p.content)
		reasoning.WriteString(p.reasoning)
		args.WriteString(p.toolArgs)
		if p.toolStart {
			start = p
		}
	}
	var fr any
	if finish != "" {
		fr = finish
	}
	c := e.base()
	choice := map[string]any{"index": 0, "logprobs": nil, "finish_reason": fr}
	if e.chat {
		delta := map[string]any{}
		if !e.roleSent {
			delta["role"] = "assistant"
			e.roleSent = true
		}
		if reasoning.Len() > 0 {
			delta["reasoning"] = reasoning.String()
		}
		if content.Len() > 0 {
			delta["content"] = content.String()
		}
		if start != nil || args.Len() > 0 {
			call := map[string]any{"index": 0}
			fn := map[string]any{"arguments": args.String()}
			if start != nil {
				call["id"], call["type"] = "call_"+e.id, "function"
				fn["name"] = start.toolName
			}
			call["function"] = fn
			delta["tool_calls"] = []any{call}
		}
		choice["delta"] = delta
	} else {
		choice["text"] = content.String()
	}
	c["choices"] = []any{choice}
	if e.continuous {
		c["usage"] = e.usageOf(gen)
	}
	return e.write(c)
}

func (e *emitter) usageChunk(gen int) {
	c := e.base()
	c["choices"] = []any{}
	c["usage"] = e.usageOf(gen)
	e.write(c)
}

func (e *emitter) errorEvent(msg string) {
	e.write(map[string]any{"error": map[string]any{"message": msg, "type": "internal_server_error", "param": nil, "code": 500}})
	e.done()
}

func (e *emitter) done() {
	_, _ = fmt.Fprint(e.w, "data: [DONE]\n\n")
	_ = http.NewResponseController(e.w).Flush()
}
