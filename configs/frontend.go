package configs

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Frontend is the configuration of one api-frontend process. Field tags name
// the command-line flag, the YAML key and the help text; environment
// variables are SLUICE_ plus the flag name upper-cased with '-' → '_'.
type Frontend struct {
	Model           string `flag:"model" yaml:"model" usage:"model: HF directory, .gguf, llama2.c .bin, or demo"`
	Tokenizer       string `flag:"tokenizer" yaml:"tokenizer" usage:"tokenizer file or directory (overrides the model's; o200k_harmony[:RANKS] for gpt-oss)"`
	Host            string `flag:"host" yaml:"host" usage:"address to listen on"`
	Port            int    `flag:"port" yaml:"port" usage:"TCP port to listen on"`
	Engine          string `flag:"engine" yaml:"engine" usage:"spawn (start engine-core as a child) or ADDR[,ADDR2…] of running engines"`
	ServedModelName string `flag:"served-model-name" yaml:"served_model_name" usage:"model name clients use (default: --model)"`
	StreamInterval  int    `flag:"stream-interval" yaml:"stream_interval" usage:"tokens per streamed chunk after the first (per-request override: stream_interval)"`
	APIKey          string `flag:"api-key" yaml:"api_key" usage:"require this Bearer key on /v1 endpoints (also SLUICE_API_KEY)"`

	EnableAutoToolChoice bool   `flag:"enable-auto-tool-choice" yaml:"enable_auto_tool_choice" usage:"allow tool_choice auto (needs --tool-call-parser)"`
	ToolCallParser       string `flag:"tool-call-parser" yaml:"tool_call_parser" usage:"tool call parser name (hermes, llama3_json, …, openai for gpt-oss harmony)"`
	ReasoningParser      string `flag:"reasoning-parser" yaml:"reasoning_parser" usage:"reasoning parser name (deepseek_r1, qwen3, openai_gptoss)"`
	ReasoningField       string `flag:"reasoning-field" yaml:"reasoning_field" usage:"name of the reasoning field in chat messages: reasoning or reasoning_content"`
	// StructuredOutputsWhitespace is the JSON whitespace of json_schema and
	// json_object constraints (constraint.Whitespace).
	StructuredOutputsWhitespace string `flag:"structured-outputs-whitespace" yaml:"structured_outputs_whitespace" usage:"whitespace JSON constraints allow between tokens: bounded (llama.cpp's: a space, or a newline and up to 20 spaces/tabs; none before the value), compact (at most a space, as vLLM's disable_any_whitespace) or any (up to 20 spaces/tabs/newlines around each token and before the value)"`

	MaxQueuedRequests int   `flag:"max-queued-requests" yaml:"max_queued_requests" usage:"requests waiting for their first token beyond which new ones get 429 (0: unlimited)"`
	MaxBodyBytes      int64 `flag:"max-body-bytes" yaml:"max_body_bytes" usage:"largest request body accepted (413 beyond)"`
	// MaxStreamBufferBytes bounds what one stream holds for a client that does not read.
	MaxStreamBufferBytes int `flag:"max-stream-buffer-bytes" yaml:"max_stream_buffer_bytes" usage:"bytes one stream may hold unwritten for a client that does not read; past it the request is aborted (0: 16 MiB, -1: no bound)"`

	// Per-request cost limits (issue 21; docs/RELIABILITY.md): a breach is a
	// 400 naming the field and the flag.
	MaxStopStrings    int `flag:"max-stop-strings" yaml:"max_stop_strings" usage:"most stop strings per request"`
	MaxStopStrBytes   int `flag:"max-stop-str-bytes" yaml:"max_stop_str_bytes" usage:"most bytes of all of a request's stop strings together"`
	MaxLogitBias      int `flag:"max-logit-bias" yaml:"max_logit_bias" usage:"most logit_bias entries per request"`
	MaxSeqsPerRequest int `flag:"max-seqs-per-request" yaml:"max_seqs_per_request" usage:"most sequences (prompts × n) per request"`
	MaxTokenizeTokens int `flag:"max-tokenize-tokens" yaml:"max_tokenize_tokens" usage:"most tokens /tokenize answers"`
	// MaxGrammarBytes is the most estimated memory of one compiled
	// structured-output grammar; larger ones get a 400.
	MaxGrammarBytes      int64         `flag:"max-grammar-bytes" yaml:"max_grammar_bytes" usage:"most estimated bytes of one compiled structured-output grammar (larger ones get a 400)"`
	MaxTokenizeBodyBytes int64         `flag:"max-tokenize-body-bytes" yaml:"max_tokenize_body_bytes" usage:"largest /tokenize and /detokenize body accepted (413 beyond)"`
	ChatTemplate         string        `flag:"chat-template" yaml:"chat_template" usage:"Jinja chat template file overriding the model's"`
	WebUI                bool          `flag:"web-ui" yaml:"web_ui" usage:"serve the built-in web UI (playground and dashboard) at /ui/"`
	APIServerCount       int           `flag:"api-server-count" yaml:"api_server_count" usage:"frontend processes sharing the port; above 1 this process supervises them (and engine-core with --engine spawn)"`
	ShutdownTimeout      time.Duration `flag:"shutdown-timeout" yaml:"shutdown_timeout" usage:"on SIGTERM, how long open streams may finish before they are ended"`
	LogFormat            string        `flag:"log-format" yaml:"log_format" usage:"log format: text or json"`
	PprofAddr            string        `flag:"pprof-addr" yaml:"pprof_addr" usage:"serve net/http/pprof on this address (off when empty)"`
	// GCPercent is the frontend process's Go GC target (GOGC): each
	// request allocates a few kB, and with Go's default of 100 the
	// collections of a small heap cost several µs of CPU per request.
	GCPercent int `flag:"gc-percent" yaml:"gc_percent" usage:"Go GC target of this process (as GOGC: heap growth between collections, in % of the live heap; -1: off); the GOGC environment variable wins when set"`
	// Procs picks how a lone frontend sizes its GOMAXPROCS: auto (one P
	// while many streams run, all cores otherwise and from a request that
	// starts at an idle server; api-frontend/procs) or all (Go's default:
	// every core, always). The GOMAXPROCS environment variable wins when
	// set (as it is for the children of --api-server-count above 1).
	Procs string `flag:"procs" yaml:"procs" usage:"GOMAXPROCS of a lone frontend: auto (one P once 32 or more requests are in flight and none has started at an idle server for 1 s, which costs less CPU per streamed token; all cores at start and from each request that starts at an idle server, so a burst there is taken in on every core and reaches the engine together) or all (every core, always); the GOMAXPROCS environment variable wins when set"`
	// HTTPServer picks the HTTP/1.1 connection server: lean (the
	// default; api-frontend/httpserve: the same answers, less CPU per
	// request) or net/http (http.Server; the one that also speaks HTTP/2
	// and TLS where a caller configures them).
	HTTPServer string `flag:"http-server" yaml:"http_server" usage:"HTTP/1.1 connection server: lean (api-frontend/httpserve: same answers as net/http, less CPU per request) or net/http"`
	// SendBatch picks how the engine's output goroutine sends a step's
	// chunks: io_uring (one io_uring_enter per step where the kernel
	// allows it, else one send(2) each) or off (one send(2) each).
	SendBatch      string        `flag:"send-batch" yaml:"send_batch" usage:"how a step's stream chunks are sent: io_uring (one system call per engine step where available, else one send each) or off"`
	FrontendID     string        `flag:"frontend-id" yaml:"frontend_id" usage:"identity towards the engine (default: generated)"`
	EngineStartup  time.Duration `flag:"engine-startup-timeout" yaml:"engine_startup_timeout" usage:"how long to wait for the engine's READY"`
	EngineLiveness time.Duration `flag:"engine-liveness-timeout" yaml:"engine_liveness_timeout" usage:"an engine silent this long is down (its streams end with an error)"`
	// EngineLink picks who speaks ZeroMQ towards the engine: zmtp (the
	// frontend's own ZMTP 3.0 reader in Go for ipc:// and tcp:// engines
	// without CURVE; ipc/zmqtransport/gopump.go) or libzmq (libzmq's DEALER
	// on a C pump thread, as CURVE always uses).
	EngineLink string `flag:"engine-link" yaml:"engine_link" usage:"who speaks ZeroMQ towards the engine: zmtp (ZMTP 3.0 in Go, no libzmq threads; CURVE links always use libzmq) or libzmq"`
	// EngineCurveKeyFile turns on CURVE encryption towards tcp:// engines.
	EngineCurveKeyFile string `flag:"engine-curve-public-key-file" yaml:"engine_curve_public_key_file" usage:"file with the engine's Z85 CURVE public key: encrypts the tcp:// connection to the engine"`
	// CurveSecretKeyFile is this frontend's CURVE identity (for engines that authenticate clients).
	CurveSecretKeyFile string `flag:"curve-secret-key-file" yaml:"curve_secret_key_file" usage:"file with this frontend's Z85 CURVE secret key (default: an ephemeral key; needed when the engine has --curve-allowed-clients-file)"`

	// The /v1/responses store (docs/DEPLOY.md).
	ResponsesStore         string        `flag:"responses-store" yaml:"responses_store" usage:"SQLite file keeping /v1/responses objects, shared by the frontends of a host (default: responses-PORT.db in the runtime directory; off: keep none)"`
	ResponsesStoreMaxBytes int64         `flag:"responses-store-max-bytes" yaml:"responses_store_max_bytes" usage:"size cap of the response store; the oldest responses go first beyond it"`
	ResponsesStoreTTL      time.Duration `flag:"responses-store-ttl" yaml:"responses_store_ttl" usage:"how long a stored response lives"`
	ResponsesKeyFile       string        `flag:"responses-key-file" yaml:"responses_key_file" usage:"32-byte key file sealing reasoning (encrypted_content, thinking signatures); created when missing (default: responses.key beside the store)"`

	// Engine flags passed through to engine-core when spawning.
	Executor                   string  `flag:"executor" yaml:"executor" usage:"engine executor when spawning: cpu or sim"`
	MaxNumSeqs                 int     `flag:"max-num-seqs" yaml:"max_num_seqs" usage:"engine --max-num-seqs when spawning"`
	MaxNumBatchedTokens        int     `flag:"max-num-batched-tokens" yaml:"max_num_batched_tokens" usage:"engine --max-num-batched-tokens when spawning"`
	MaxModelLen                int     `flag:"max-model-len" yaml:"max_model_len" usage:"engine --max-model-len when spawning"`
	BlockSize                  int     `flag:"block-size" yaml:"block_size" usage:"engine --block-size when spawning"`
	KVCacheMemory              string  `flag:"kv-cache-memory" yaml:"kv_cache_memory" usage:"engine --kv-cache-memory when spawning"`
	KVCacheDType               string  `flag:"kv-cache-dtype" yaml:"kv_cache_dtype" usage:"engine --kv-cache-dtype when spawning (auto, float32 or float16)"`
	LongPrefillTokenThreshold  string  `flag:"long-prefill-token-threshold" yaml:"long_prefill_token_threshold" usage:"engine --long-prefill-token-threshold when spawning (auto or a number)"`
	PrefillTokensBesideDecodes string  `flag:"prefill-tokens-beside-decodes" yaml:"prefill_tokens_beside_decodes" usage:"engine --prefill-tokens-beside-decodes when spawning (auto or a number)"`
	MaxNumPartialPrefills      int     `flag:"max-num-partial-prefills" yaml:"max_num_partial_prefills" usage:"engine --max-num-partial-prefills when spawning"`
	MaxLongPartialPrefills     int     `flag:"max-long-partial-prefills" yaml:"max_long_partial_prefills" usage:"engine --max-long-partial-prefills when spawning"`
	SchedulerIdleWait          string  `flag:"scheduler-idle-wait" yaml:"scheduler_idle_wait" usage:"engine --scheduler-idle-wait when spawning (auto or a duration such as 5ms)"`
	SimStepMS                  float64 `flag:"sim-step-ms" yaml:"sim_step_ms" usage:"engine --sim-step-ms when spawning"`
	SimScript                  string  `flag:"sim-script" yaml:"sim_script" usage:"engine --sim-script when spawning"`
}

// DefaultFrontend returns the defaults of every frontend setting.
func DefaultFrontend() Frontend {
	return Frontend{
		Host:                        "0.0.0.0",
		Port:                        8000,
		Engine:                      "spawn",
		StreamInterval:              1,
		ReasoningField:              "reasoning",
		HTTPServer:                  "lean",
		SendBatch:                   "io_uring",
		EngineLink:                  "zmtp",
		StructuredOutputsWhitespace: "bounded",
		MaxBodyBytes:                32 << 20,
		// The same values as openai.Default* and server.DefaultMaxTokenizeBodyBytes.
		MaxStopStrings:       64,
		MaxStopStrBytes:      16 << 10,
		MaxLogitBias:         300,
		MaxSeqsPerRequest:    256,
		MaxTokenizeTokens:    1 << 18,
		MaxGrammarBytes:      64 << 20, // constraint.MaxGrammarBytes
		MaxTokenizeBodyBytes: 2 << 20,
		APIServerCount:       1,
		ShutdownTimeout:      30 * time.Second,
		LogFormat:            "text",
		GCPercent:            400,
		Procs:                "auto",
		EngineStartup:        5 * time.Minute,
		EngineLiveness:       3 * time.Second,
		SimStepMS:            -1,
		MaxNumSeqs:           0,
		MaxQueuedRequests:    0,

		ResponsesStoreMaxBytes: 256 << 20,
		ResponsesStoreTTL:      24 * time.Hour,
	}
}

// Validate checks the settings, naming the offending flag.
func (f *Frontend) Validate() error {
	var errs []error
	if f.Model == "" {
		errs = append(errs, errors.New("--model is required"))
	}
	if f.Port < 0 || f.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port %d out of range", f.Port))
	}
	if f.StreamInterval < 1 {
		errs = append(errs, fmt.Errorf("--stream-interval must be >= 1, got %d", f.StreamInterval))
	}
	if f.Engine == "" {
		errs = append(errs, errors.New("--engine must be spawn or a list of addresses"))
	}
	if f.HTTPServer != "net/http" && f.HTTPServer != "lean" {
		errs = append(errs, fmt.Errorf("--http-server must be net/http or lean, got %q", f.HTTPServer))
	}
	if f.EngineLink != "zmtp" && f.EngineLink != "libzmq" {
		errs = append(errs, fmt.Errorf("--engine-link must be zmtp or libzmq, got %q", f.EngineLink))
	}
	if f.SendBatch != "io_uring" && f.SendBatch != "off" {
		errs = append(errs, fmt.Errorf("--send-batch must be io_uring or off, got %q", f.SendBatch))
	}
	if f.ReasoningField != "reasoning" && f.ReasoningField != "reasoning_content" {
		errs = append(errs, fmt.Errorf("--reasoning-field must be reasoning or reasoning_content, got %q", f.ReasoningField))
	}
	switch f.StructuredOutputsWhitespace {
	case "", "bounded", "compact", "any":
	default:
		errs = append(errs, fmt.Errorf("--structured-outputs-whitespace must be bounded, compact or any, got %q", f.StructuredOutputsWhitespace))
	}
	if f.EnableAutoToolChoice && f.ToolCallParser == "" {
		errs = append(errs, errors.New("--enable-auto-tool-choice needs --tool-call-parser"))
	}
	if f.GCPercent < -1 {
		errs = append(errs, fmt.Errorf("--gc-percent must be -1 (off) or >= 0, got %d", f.GCPercent))
	}
	if f.Procs != "" && f.Procs != "auto" && f.Procs != "all" {
		errs = append(errs, fmt.Errorf("--procs must be auto or all, got %q", f.Procs))
	}
	if f.MaxQueuedRequests < 0 {
		errs = append(errs, fmt.Errorf("--max-queued-requests must be >= 0, got %d", f.MaxQueuedRequests))
	}
	for _, l := range []struct {
		flag string
		v    int64
	}{{"--max-stop-strings", int64(f.MaxStopStrings)}, {"--max-stop-str-bytes", int64(f.MaxStopStrBytes)}, {"--max-logit-bias", int64(f.MaxLogitBias)},
		{"--max-seqs-per-request", int64(f.MaxSeqsPerRequest)}, {"--max-tokenize-tokens", int64(f.MaxTokenizeTokens)}, {"--max-tokenize-body-bytes", f.MaxTokenizeBodyBytes}, {"--max-grammar-bytes", f.MaxGrammarBytes}} {
		if l.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be > 0, got %d", l.flag, l.v))
		}
	}
	if f.MaxBodyBytes <= 0 {
		errs = append(errs, fmt.Errorf("--max-body-bytes must be > 0, got %d", f.MaxBodyBytes))
	}
	if f.APIServerCount < 1 {
		errs = append(errs, fmt.Errorf("--api-server-count must be >= 1, got %d", f.APIServerCount))
	}
	if f.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout must be >= 0, got %s", f.ShutdownTimeout))
	}
	if f.EngineLiveness < 0 {
		errs = append(errs, fmt.Errorf("--engine-liveness-timeout must be >= 0, got %s", f.EngineLiveness))
	}
	if f.ResponsesStoreMaxBytes <= 0 {
		errs = append(errs, fmt.Errorf("--responses-store-max-bytes must be > 0, got %d", f.ResponsesStoreMaxBytes))
	}
	if f.ResponsesStoreTTL <= 0 {
		errs = append(errs, fmt.Errorf("--responses-store-ttl must be > 0, got %s", f.ResponsesStoreTTL))
	}
	if f.LogFormat != "text" && f.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format must be text or json, got %q", f.LogFormat))
	}
	return errors.Join(errs...)
}

// EngineAddrs returns the engine addresses of --engine, or nil for spawn.
func (f *Frontend) EngineAddrs() []string {
	if f.Engine == "spawn" {
		return nil
	}
	var out []string
	for _, a := range strings.Split(f.Engine, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// SpawnArgs returns the engine-core arguments for the pass-through engine
// flags that were set (listen address and model are added by the caller).
func (f *Frontend) SpawnArgs() []string {
	var a []string
	add := func(name, v string) { a = append(a, "--"+name, v) }
	if f.Tokenizer != "" {
		add("tokenizer", f.Tokenizer)
	}
	if f.Executor != "" {
		add("executor", f.Executor)
	}
	if f.MaxNumSeqs > 0 {
		add("max-num-seqs", fmt.Sprint(f.MaxNumSeqs))
	}
	if f.MaxNumBatchedTokens > 0 {
		add("max-num-batched-tokens", fmt.Sprint(f.MaxNumBatchedTokens))
	}
	if f.MaxModelLen > 0 {
		add("max-model-len", fmt.Sprint(f.MaxModelLen))
	}
	if f.BlockSize > 0 {
		add("block-size", fmt.Sprint(f.BlockSize))
	}
	if f.KVCacheMemory != "" {
		add("kv-cache-memory", f.KVCacheMemory)
	}
	if f.KVCacheDType != "" {
		add("kv-cache-dtype", f.KVCacheDType)
	}
	if f.LongPrefillTokenThreshold != "" {
		add("long-prefill-token-threshold", f.LongPrefillTokenThreshold)
	}
	if f.PrefillTokensBesideDecodes != "" {
		add("prefill-tokens-beside-decodes", f.PrefillTokensBesideDecodes)
	}
	if f.MaxNumPartialPrefills > 0 {
		add("max-num-partial-prefills", fmt.Sprint(f.MaxNumPartialPrefills))
	}
	if f.MaxLongPartialPrefills > 0 {
		add("max-long-partial-prefills", fmt.Sprint(f.MaxLongPartialPrefills))
	}
	if f.SchedulerIdleWait != "" {
		add("scheduler-idle-wait", f.SchedulerIdleWait)
	}
	if f.SimStepMS >= 0 {
		add("sim-step-ms", fmt.Sprint(f.SimStepMS))
	}
	if f.SimScript != "" {
		add("sim-script", f.SimScript)
	}
	return a
}
