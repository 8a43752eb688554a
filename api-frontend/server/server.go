// Package server is the frontend's HTTP layer: gin routes for the OpenAI
// compatible API (/v1/completions, /v1/chat/completions, /v1/models), vLLM's
// /tokenize and /detokenize, /health, /version and /metrics.
//
// A generation request is validated (openai), rendered through the chat
// template and tokenized, registered with the engine client (one engine
// request per choice; ids <id>-<i>), and then served by its handler
// goroutine. The engine's output goroutine runs each choice's outputproc
// State, the reasoning and tool parsers, and renders ready-to-send SSE bytes
// into the request's mailbox. Over HTTP/1.1 (sse.Start) the output
// goroutine then writes the mailbox to the socket itself with one
// non-blocking write (chunk framing pre-reserved in the buffer), and the
// connection stays alive for the client's next request. When the
// socket is full, when batches queue behind the one being dispatched, or
// for HTTP/2, it wakes the stream's handler goroutine instead (a one-slot
// channel, so wakes coalesce), which writes everything pending at once.
// While a client is behind, pending tokens stay in the State and merge into
// the next chunk, so a slow client never stalls the engine loop.
package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/sluice-llm/sluice/api-frontend/engineclient"
	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/api-frontend/respstore"
	"github.com/sluice-llm/sluice/api-frontend/seal"
	"github.com/sluice-llm/sluice/api-frontend/sse"
	"github.com/sluice-llm/sluice/constraint"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/outputproc"
	"github.com/sluice-llm/sluice/text/tokenizer"
)

// Config is the server's behaviour.
type Config struct {
	// ServedModelNames are the names clients may use; the first is reported.
	ServedModelNames []string
	// ModelPath is reported as the model's root in /v1/models.
	ModelPath string
	// NoSendBatch sends each direct chunk with its own send(2) as the
	// output arrives, instead of queueing a step's chunks and sending them
	// with one io_uring_enter at the step's end (where io_uring is
	// available; see sends.go).
	NoSendBatch bool
	// StreamInterval is the default stream interval (>= 1).
	StreamInterval int
	// APIKey, when set, is required as a Bearer token on the API routes.
	APIKey string
	// MaxQueuedRequests bounds the sequences (prompts × n) of requests
	// waiting for their first token (0: unlimited); beyond it requests get
	// 429.
	MaxQueuedRequests int
	// MaxBodyBytes bounds request bodies (413 beyond).
	MaxBodyBytes int64
	// MaxStreamBufferBytes bounds the bytes one stream may hold for a
	// client that does not read (rendered and unwritten, plus tokens held
	// back): past it the request is aborted in the engine and its socket
	// writes fail. 0 means DefaultMaxStreamBufferBytes; negative, no bound.
	MaxStreamBufferBytes int
	// EnableAutoToolChoice, ToolCallParser, ReasoningParser and
	// ReasoningField configure tool calling and reasoning output.
	EnableAutoToolChoice bool
	ToolCallParser       string
	ReasoningParser      string
	ReasoningField       string
	// FrontendID, Version and Commit are reported by /version.
	FrontendID string
	Version    string
	Commit     string
	// MaxModelLen overrides the engine's context length when > 0.
	MaxModelLen int
	// RequestLimits bound one request's stop strings, logit_bias,
	// sequences (prompts × n) and /tokenize output; zero fields take
	// openai's defaults.
	RequestLimits openai.RequestLimits
	// MaxTokenizeBodyBytes bounds /tokenize and /detokenize bodies (413
	// beyond; default DefaultMaxTokenizeBodyBytes).
	MaxTokenizeBodyBytes int64
	// JSONWhitespace is the whitespace JSON constraints allow unless a
	// request asks for compact JSON.
	JSONWhitespace constraint.Whitespace

	// sndBuf, when > 0, sets SO_SNDBUF of streams' connections (tests use
	// it to make a slow client fill the socket quickly).
	sndBuf int
}

// ChatRenderer renders a chat request's messages into the prompt text.
type ChatRenderer interface {
	Render(c *openai.Chat) (string, error)
}

// ReasoningParser splits streamed text into reasoning and content.
type ReasoningParser interface {
	Add(text string) (reasoning, content string)
	Finish() (reasoning, content string)
}

// Deps are the server's collaborators.
type Deps struct {
	Engines   *engineclient.Client
	Tokenizer tokenizer.Tokenizer
	// Chat renders chat prompts; nil means the model has no chat template
	// (chat requests then get 400).
	Chat ChatRenderer
	// NewReasoning creates a reasoning parser for a chat choice; nil when
	// no --reasoning-parser is configured.
	NewReasoning func(c *openai.Chat, prompt string) (ReasoningParser, error)
	Metrics      *Metrics
	Log          *zap.Logger
	// Store keeps /v1/responses objects (nil: none are kept, and
	// previous_response_id is refused).
	Store *respstore.Store
	// Sealer seals reasoning for encrypted_content and thinking
	// signatures (nil: none).
	Sealer *seal.Sealer
}

// Server serves the HTTP API.
type Server struct {
	cfg     Config
	deps    Deps
	log     *zap.Logger
	metrics *Metrics
	router  *gin.Engine
	started time.Time
	// constraints memoizes compiled structured-output constraints.
	constraints *openai.ConstraintCache

	draining   atomic.Bool
	waiting    atomic.Int64 // sequences (choices) of requests without a first token yet
	streams    sync.WaitGroup
	endCtx     context.Context // cancelled when open streams must end now
	endStreams context.CancelFunc
	// deltas holds, per engine, the delta each of its outputs is processed
	// into: only that engine's output goroutine calls choice.Output, one
	// output at a time, so one reused (and so cache-hot) delta serves it.
	deltas []engineDelta
	// sends holds, per engine, the batch its output goroutine queues the
	// step's direct sends in (see engineSends); nil with
	// Config.NoSendBatch.
	sends []engineSends
	// newBatch makes an engine's send batch (nil: sse.NewBatch); tests
	// swap in sse.NewLoopBatch.
	newBatch func(max int) (*sse.Batch, error)
}

// engineDelta is one engine's scratch delta, padded to whole cache lines
// so that two engines' output goroutines do not share one.
type engineDelta struct {
	outputproc.Delta
	_ [64 - unsafe.Sizeof(outputproc.Delta{})%64]byte
}

// DefaultMaxStreamBufferBytes is Config.MaxStreamBufferBytes's default:
// far above what a reading client ever leaves buffered (a chunk or two),
// far below what an n=128, logprobs=20 stream grows to when unread.
const DefaultMaxStreamBufferBytes = 16 << 20

// New builds the server and its routes.
func New(cfg Config, deps Deps) *Server {
	if cfg.StreamInterval < 1 {
		cfg.StreamInterval = 1
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 32 << 20
	}
	switch {
	case cfg.MaxStreamBufferBytes == 0:
		cfg.MaxStreamBufferBytes = DefaultMaxStreamBufferBytes
	case cfg.MaxStreamBufferBytes < 0:
		cfg.MaxStreamBufferBytes = 0
	}
	if cfg.ReasoningField == "" {
		cfg.ReasoningField = "reasoning"
	}
	cfg.RequestLimits = cfg.RequestLimits.WithDefaults()
	if cfg.MaxTokenizeBodyBytes <= 0 {
		cfg.MaxTokenizeBodyBytes = DefaultMaxTokenizeBodyBytes
	}
	if deps.Log == nil {
		deps.Log = zap.NewNop()
	}
	if deps.Metrics == nil {
		deps.Metrics = NewMetrics(cfg.ServedModelNames[0])
	}
	s := &Server{cfg: cfg, deps: deps, log: deps.Log, metrics: deps.Metrics, started: time.Now(), constraints: openai.NewConstraintCache(256)}
	s.endCtx, s.endStreams = context.WithCancel(context.Background())
	if deps.Engines != nil {
		s.deltas = make([]engineDelta, deps.Engines.NumEngines())
		if !cfg.NoSendBatch {
			s.sends = make([]engineSends, deps.Engines.NumEngines())
			deps.Engines.OnBatchDone(s.flushSends)
		}
		for i := 0; i < deps.Engines.NumEngines(); i++ {
			s.metrics.InitEngine(i)
		}
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(s.recovery)
	r.GET("/health", s.health)
	r.GET("/version", s.version)
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{})))
	api := r.Group("/", s.auth)
	api.GET("/v1/models", s.models)
	api.POST("/v1/completions", s.completions)
	api.POST("/v1/chat/completions", s.chatCompletions)
	api.POST("/tokenize", s.tokenize)
	api.POST("/v1/responses", s.responses)
	api.GET("/v1/responses/:id", s.getResponse)
	api.DELETE("/v1/responses/:id", s.deleteResponse)
	msgs := r.Group("/", markMessages, s.auth)
	msgs.POST("/v1/messages", s.messages)
	msgs.POST("/v1/messages/count_tokens", s.countTokens)
	api.POST("/detokenize", s.detokenize)
	r.NoRoute(func(c *gin.Context) {
		writeError(c, openai.NewError(http.StatusNotFound, "no route for %s %s", c.Request.Method, c.Request.URL.Path))
	})
	r.NoMethod(func(c *gin.Context) {
		writeError(c, openai.NewError(http.StatusMethodNotAllowed, "method %s not allowed on %s", c.Request.Method, c.Request.URL.Path))
	})
	r.HandleMethodNotAllowed = true
	s.router = r
	return s
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.router }

// Router returns the gin engine, for mounting extra routes (the web UI)
// before serving. Routes added this way are not behind --api-key.
func (s *Server) Router() *gin.Engine { return s.router }

// Metrics returns the server's metrics (their registry feeds /metrics).
func (s *Server) Metrics() *Metrics { return s.metrics }

// BeginDrain makes /health answer 503 and refuses new generation requests;
// open streams go on.
func (s *Server) BeginDrain() { s.draining.Store(true) }

// EndStreams ends every open stream now: what was generated is flushed,
// then an error event and [DONE]; the engine requests are aborted.
func (s *Server) EndStreams() { s.endStreams() }

// WaitStreams waits until every open generation request has returned, or
// ctx ends; it reports whether they all returned.
func (s *Server) WaitStreams(ctx context.Context) bool {
	done := make(chan struct{})
	go func() { s.streams.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// EngineState is called when an engine goes up or down.
func (s *Server) EngineState(engine int, up bool, reason string) {
	s.metrics.EngineState(engine, up)
	if up {
		s.log.Info("engine ready", zap.Int("engine", engine))
	} else {
		s.log.Warn("engine down", zap.Int("engine", engine), zap.String("reason", reason))
	}
}

func (s *Server) recovery(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v)
			}
			s.log.Error("handler panic", zap.Any("panic", v), zap.Stack("stack"))
			if !c.Writer.Written() {
				writeError(c, openai.NewError(http.StatusInternalServerError, "internal error"))
			}
			c.Abort()
		}
	}()
	c.Next()
}

func (s *Server) auth(c *gin.Context) {
	if s.cfg.APIKey == "" {
		return
	}
	h := c.GetHeader("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		// Anthropic's SDKs send the key as x-api-key.
		tok, ok = c.GetHeader("X-Api-Key"), c.GetHeader("X-Api-Key") != ""
	}
	if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(s.cfg.APIKey)) != 1 {
		writeError(c, &openai.Error{Status: http.StatusUnauthorized, Type: "AuthenticationError", Message: "invalid or missing API key"})
		c.Abort()
	}
}

// writeError sends an error body with its status: OpenAI's shape, or
// Anthropic's on the Messages routes.
func writeError(c *gin.Context, e *openai.Error) {
	writeAPIError(c, e)
}

func (s *Server) health(c *gin.Context) {
	switch {
	case s.draining.Load():
		c.String(http.StatusServiceUnavailable, "draining")
	case s.deps.Engines == nil || !s.deps.Engines.Healthy():
		c.String(http.StatusServiceUnavailable, "engine unavailable")
	default:
		c.Status(http.StatusOK)
	}
}

func (s *Server) version(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"version": s.cfg.Version, "commit": s.cfg.Commit, "frontend_id": s.cfg.FrontendID, "pid": os.Getpid()})
}

// maxModelLen is the context length in force.
func (s *Server) maxModelLen() int {
	if s.cfg.MaxModelLen > 0 {
		return s.cfg.MaxModelLen
	}
	if s.deps.Engines != nil {
		if r, ok := s.deps.Engines.Ready(); ok {
			return r.MaxModelLen
		}
	}
	return 0
}

// eosIDs are the engine's EOS ids (the tokenizer's when no engine is up).
func (s *Server) eosIDs() []int32 {
	if s.deps.Engines != nil {
		if r, ok := s.deps.Engines.Ready(); ok && len(r.EOSTokenIDs) > 0 {
			return r.EOSTokenIDs
		}
	}
	if e := s.deps.Tokenizer.EOS(); e >= 0 {
		return []int32{e}
	}
	return nil
}

func (s *Server) limits() openai.Limits {
	return openai.Limits{VocabSize: s.deps.Tokenizer.VocabSize(), MaxModelLen: s.maxModelLen(), Constraints: s.constraints, RequestLimits: s.cfg.RequestLimits, JSONWhitespace: s.cfg.JSONWhitespace}
}

func (s *Server) models(c *gin.Context) {
	type model struct {
		ID          string `json:"id"`
		Object      string `json:"object"`
		Created     int64  `json:"created"`
		OwnedBy     string `json:"owned_by"`
		Root        string `json:"root"`
		Parent      *int   `json:"parent"`
		MaxModelLen int    `json:"max_model_len"`
		// VocabSize lets clients (bench serve's random dataset) draw
		// token ids the model accepts.
		VocabSize  int   `json:"vocab_size"`
		Permission []any `json:"permission"`
	}
	var data []model
	for _, n := range s.cfg.ServedModelNames {
		data = append(data, model{ID: n, Object: "model", Created: s.started.Unix(), OwnedBy: "sluice", Root: s.cfg.ModelPath, MaxModelLen: s.maxModelLen(), VocabSize: s.deps.Tokenizer.VocabSize(), Permission: []any{}})
	}
	c.JSON(http.StatusOK, gin.H{"object": "list", "data": data})
}

// checkModel returns the served name for a request's model field.
func (s *Server) checkModel(m string) *openai.Error {
	if m == "" {
		return nil
	}
	for _, n := range s.cfg.ServedModelNames {
		if n == m {
			return nil
		}
	}
	return openai.NotFound("model", "The model `%s` does not exist.", m)
}

// bind reads and decodes the request body into req and checks the model it
// names (*model, a field of req), writing the error response and reporting
// false when any of that fails.
func (s *Server) bind(c *gin.Context, req any, model *string) bool {
	return s.bindMax(c, req, model, s.cfg.MaxBodyBytes)
}

// bindMax is bind with a body limit of maxBody bytes.
func (s *Server) bindMax(c *gin.Context, req any, model *string, maxBody int64) bool {
	body, e := s.readBody(c, maxBody)
	if e == nil {
		e = openai.Decode(body, req)
	}
	if e == nil {
		e = s.checkModel(*model)
	}
	if e != nil {
		writeError(c, e)
		return false
	}
	return true
}

// bodyReadTimeout bounds how long a client may take to send its request
// body (a slowloris dripping bytes would otherwise hold a goroutine and a
// connection forever). It is a per-request read deadline, set here and
// cleared once the body is in, rather than http.Server.ReadTimeout, which
// would also cancel long streaming responses.
const bodyReadTimeout = 30 * time.Second

// readBody reads the request body within maxBody bytes and the time limit.
func (s *Server) readBody(c *gin.Context, maxBody int64) ([]byte, *openai.Error) {
	rc := http.NewResponseController(c.Writer)
	deadline := rc.SetReadDeadline(time.Now().Add(bodyReadTimeout)) == nil
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxBody))
	if err != nil {
		// Leave the deadline in place and close the connection: net/http
		// would otherwise wait for the rest of the body to reuse it.
		c.Header("Connection", "close")
	} else if deadline {
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, openai.NewError(http.StatusRequestEntityTooLarge, "request body is larger than %d bytes", maxBody)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, openai.NewError(http.StatusRequestTimeout, "request body not received within %s", bodyReadTimeout)
		}
		return nil, openai.BadRequest("", "read request body: %v", err)
	}
	return body, nil
}

// newID returns a random request id suffix.
func newID() string {
	var b [24]byte
	const hex = "0123456789abcdef"
	for i := 0; i < len(b); i += 8 {
		v := rand.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = hex[v&0xf]
			v >>= 4
		}
	}
	return string(b[:])
}

// DefaultMaxTokenizeBodyBytes is the default body limit of /tokenize and
// /detokenize (--max-tokenize-body-bytes): a 30 MB prompt with
// return_token_strs once peaked the frontend at 1.67 GB.
const DefaultMaxTokenizeBodyBytes = 2 << 20

func (s *Server) tokenize(c *gin.Context) {
	var req openai.TokenizeRequest
	if !s.bindMax(c, &req, &req.Model, s.cfg.MaxTokenizeBodyBytes) {
		return
	}
	var ids []int32
	switch {
	case req.Prompt != nil:
		ids = s.deps.Tokenizer.Encode(*req.Prompt, req.AddSpecialTokens == nil || *req.AddSpecialTokens)
	case req.Messages != nil:
		chatReq := openai.ChatRequest{Messages: req.Messages, AddGenerationPrompt: req.AddGenerationPrompt, ChatTemplateKwargs: req.ChatTemplateKwargs, Tools: req.Tools}
		chat, e := chatReq.Validate(s.limits(), openai.ToolConfig{AutoEnabled: true, Parser: "any"})
		if e != nil {
			writeError(c, e)
			return
		}
		text, e := s.renderChat(chat)
		if e != nil {
			writeError(c, e)
			return
		}
		ids = s.deps.Tokenizer.Encode(text, req.AddSpecialTokens != nil && *req.AddSpecialTokens)
	default:
		writeError(c, openai.BadRequest("prompt", "either prompt or messages is required"))
		return
	}
	if lim := s.cfg.RequestLimits.MaxTokenizeTokens; len(ids) > lim {
		param := "prompt"
		if req.Prompt == nil {
			param = "messages"
		}
		writeError(c, openai.BadRequest(param, "the input is %d tokens, more than the limit of %d (--max-tokenize-tokens)", len(ids), lim))
		return
	}
	out := gin.H{"count": len(ids), "max_model_len": s.maxModelLen(), "tokens": ids, "token_strs": nil}
	if ids == nil {
		out["tokens"] = []int32{}
	}
	if req.ReturnTokenStrs {
		strs := make([]string, len(ids))
		for i, id := range ids {
			strs[i] = string(s.deps.Tokenizer.TokenBytes(id))
		}
		out["token_strs"] = strs
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) detokenize(c *gin.Context) {
	var req openai.DetokenizeRequest
	if !s.bindMax(c, &req, &req.Model, s.cfg.MaxTokenizeBodyBytes) {
		return
	}
	vocab := s.deps.Tokenizer.VocabSize()
	ids := make([]int32, len(req.Tokens))
	for i, t := range req.Tokens {
		if t < 0 || t >= int64(vocab) {
			writeError(c, openai.BadRequest("tokens", "token id %d is out of vocabulary (size %d)", t, vocab))
			return
		}
		ids[i] = int32(t)
	}
	c.JSON(http.StatusOK, gin.H{"prompt": s.deps.Tokenizer.Decode(ids, false)})
}

func (s *Server) renderChat(chat *openai.Chat) (string, *openai.Error) {
	if s.deps.Chat == nil {
		return "", openai.BadRequest("messages", "this model has no chat template; start the server with --chat-template FILE")
	}
	text, err := s.deps.Chat.Render(chat)
	if err != nil {
		return "", openai.BadRequest("messages", "chat template: %v", err)
	}
	return text, nil
}

// finishReason spells an engine finish reason for the API.
func finishReason(f ipc.FinishReason) string {
	if s := f.String(); s != "" {
		return s
	}
	return "stop"
}

func itoa(i int) string { return strconv.Itoa(i) }
