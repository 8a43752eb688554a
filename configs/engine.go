package configs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Engine is the configuration of one engine-core process. Field tags name
// the command-line flag, the YAML key and the help text; environment
// variables are SLUICE_ plus the flag name upper-cased with '-' → '_'.
type Engine struct {
	Model           string `flag:"model" yaml:"model" usage:"model: HF directory, .gguf, llama2.c .bin (with --tokenizer), or demo"`
	Tokenizer       string `flag:"tokenizer" yaml:"tokenizer" usage:"tokenizer file or directory (for llama2.c checkpoints; overrides the model's; o200k_harmony[:RANKS] for gpt-oss)"`
	ServedModelName string `flag:"served-model-name" yaml:"served_model_name" usage:"model name announced to frontends (default: --model)"`
	Listen          string `flag:"listen" yaml:"listen" usage:"endpoint to bind: ipc:///path or tcp://host:port"`
	Executor        string `flag:"executor" yaml:"executor" usage:"cpu (run the model), cuda (NVIDIA GPU; only in bin/engine-core-cuda, built with -tags cuda) or sim (simulated accelerator for capacity tests)"`
	EngineID        string `flag:"engine-id" yaml:"engine_id" usage:"engine identity in READY and outputs (default: hostname-pid)"`

	MaxNumSeqs          int `flag:"max-num-seqs" yaml:"max_num_seqs" usage:"most requests running at once"`
	MaxNumBatchedTokens int `flag:"max-num-batched-tokens" yaml:"max_num_batched_tokens" usage:"most tokens computed per step (prefill chunks + decodes)"`
	// LongPrefillTokenThreshold caps the prompt tokens one request
	// computes per step: "auto" or an integer (LongPrefillThreshold
	// resolves it).
	LongPrefillTokenThreshold string `flag:"long-prefill-token-threshold" yaml:"long_prefill_token_threshold" usage:"most prompt tokens one request computes per step, so a long prompt delays running streams by one chunk at most; a prompt with more tokens left is long (--max-long-partial-prefills): auto (256 with --executor cpu, 0 with sim and cuda) or a number (0: no cap; with --max-num-partial-prefills > 1, 0 means 4 % of max-model-len, as in vLLM)"`
	// PrefillTokensBesideDecodes caps the prompt tokens of a step that
	// also decodes: "auto" or an integer (PrefillBesideDecodes resolves it).
	PrefillTokensBesideDecodes string `flag:"prefill-tokens-beside-decodes" yaml:"prefill_tokens_beside_decodes" usage:"most prompt tokens, all requests together, in a step that also decodes running streams, so a burst of prompts delays their next token by that much prefill at most (a step without decodes takes the whole --max-num-batched-tokens; Sluice's, not vLLM's): auto (256 with --executor cpu, 0 with sim and cuda) or a number (0: no cap)"`
	MaxNumPartialPrefills      int    `flag:"max-num-partial-prefills" yaml:"max_num_partial_prefills" usage:"most requests computing prompt tokens in one step, sharing its token budget evenly (1: no limit beyond --max-num-batched-tokens, vLLM's default)"`
	MaxLongPartialPrefills     int    `flag:"max-long-partial-prefills" yaml:"max_long_partial_prefills" usage:"with --max-num-partial-prefills > 1, most long prompts (see --long-prefill-token-threshold) computing in one step; shorter prompts may start ahead of long ones held back (<= --max-num-partial-prefills)"`
	MaxModelLen                int    `flag:"max-model-len" yaml:"max_model_len" usage:"most prompt + output tokens per request (0: the model's)"`
	BlockSize                  int    `flag:"block-size" yaml:"block_size" usage:"token positions per KV-cache block"`
	KVCacheMemory              int64  `flag:"kv-cache-memory" yaml:"kv_cache_memory" usage:"bytes of KV cache, e.g. 2GiB (0: --num-kv-blocks, or the default: max-num-seqs × max-model-len capped at half of MemAvailable after the weights)"`
	NumKVBlocks                int    `flag:"num-kv-blocks" yaml:"num_kv_blocks" usage:"number of KV-cache blocks (overrides --kv-cache-memory)"`
	KVCacheDType               string `flag:"kv-cache-dtype" yaml:"kv_cache_dtype" usage:"KV-cache element type: auto (the model's: float32 for F32 weights, float16 for F16/BF16/quantized), float32, or float16 (CPU executor)"`
	DisablePrefixCaching       bool   `flag:"disable-prefix-caching" yaml:"disable_prefix_caching" usage:"turn the prefix cache off"`
	// CPUFutexSleep lets the CPU executor's compute threads sleep on a
	// futex between ops (cpu.Options.FutexSleep; off by default).
	CPUFutexSleep         bool `flag:"cpu-futex-sleep" yaml:"cpu_futex_sleep" usage:"CPU executor (Linux): compute threads sleep on a futex between ops, woken by the OS instead of the Go scheduler (experimental: faster steps on an idle machine, slower on a loaded one)"`
	MXFP4GroupActivations bool `flag:"mxfp4-group-activations" yaml:"mxfp4_group_activations" usage:"CPU executor: MXFP4 expert groups of 8+ prefill rows quantize activations per 320 values (about 25 % faster gpt-oss prefill; results then depend on the batch)"`
	Threads               int  `flag:"threads" yaml:"threads" usage:"compute threads for --executor cpu (0: all cores)"`
	// SchedulerIdleWait is the arrival-coalescing window: "auto" or a
	// duration (IdleWait resolves it).
	SchedulerIdleWait string `flag:"scheduler-idle-wait" yaml:"scheduler_idle_wait" usage:"when a request wakes an idle engine, how long to keep receiving before the first step, so that requests sent together share it (ends early once they fill a step; never waits while requests run): auto (10ms with --executor cpu, 0 with sim and cuda) or a duration such as 2ms (0: off)"`
	Seed              int64  `flag:"seed" yaml:"seed" usage:"seed of the per-request seeds drawn for requests without one"`

	SimStepMS            float64 `flag:"sim-step-ms" yaml:"sim_step_ms" usage:"simulator: fixed time per step in milliseconds"`
	SimPrefillUSPerToken float64 `flag:"sim-prefill-us-per-token" yaml:"sim_prefill_us_per_token" usage:"simulator: microseconds per prompt token computed"`
	SimDecodeUSPerToken  float64 `flag:"sim-decode-us-per-token" yaml:"sim_decode_us_per_token" usage:"simulator: microseconds per generated token computed"`
	SimEOSProb           float64 `flag:"sim-eos-prob" yaml:"sim_eos_prob" usage:"simulator: probability of EOS per generated token (0: never)"`
	SimScript            string  `flag:"sim-script" yaml:"sim_script" usage:"simulator: JSON-lines file of {\"match\", \"output\"} scripted replies"`
	SimTokenMin          int     `flag:"sim-token-min" yaml:"sim_token_min" usage:"simulator: lowest generated token id (special ids are always skipped)"`
	SimTokenMax          int     `flag:"sim-token-max" yaml:"sim_token_max" usage:"simulator: highest generated token id (0: vocabulary size - 1)"`
	SimVocabSize         int     `flag:"sim-vocab-size" yaml:"sim_vocab_size" usage:"simulator: vocabulary size when no tokenizer can be loaded"`

	ConstraintTimeout time.Duration `flag:"constraint-timeout" yaml:"constraint_timeout" usage:"longest a structured-output grammar may take to compile before the request is refused"`
	// GrammarCacheBytes bounds the compiled structured-output grammars
	// kept (estimated bytes; least recently used evicted first).
	GrammarCacheBytes int64 `flag:"grammar-cache-bytes" yaml:"grammar_cache_bytes" usage:"estimated bytes of compiled structured-output grammars kept across requests (least recently used evicted)"`
	// MaxGrammarBytes is the most memory (estimated) one compiled
	// structured-output grammar may take; larger ones are refused.
	MaxGrammarBytes int64 `flag:"max-grammar-bytes" yaml:"max_grammar_bytes" usage:"most estimated bytes of one compiled structured-output grammar (larger ones are refused)"`
	// FrontendParkGrace is how long a silent but connected frontend keeps
	// its requests running (outputs held) before they are freed.
	FrontendParkGrace time.Duration `flag:"frontend-park-grace" yaml:"frontend_park_grace" usage:"how long a silent, still connected frontend's requests run on (outputs held) before they are freed"`
	// FrontendParkBufferBytes bounds the outputs held for one parked frontend.
	FrontendParkBufferBytes int           `flag:"frontend-park-buffer-bytes" yaml:"frontend_park_buffer_bytes" usage:"most bytes of outputs held for one silent frontend; past it its requests are freed"`
	ShutdownTimeout         time.Duration `flag:"shutdown-timeout" yaml:"shutdown_timeout" usage:"on SIGTERM, how long running requests may finish"`
	LogFormat               string        `flag:"log-format" yaml:"log_format" usage:"log format: json or console"`
	// CurveSecretKeyFile turns on CURVE encryption of a tcp:// --listen socket.
	CurveSecretKeyFile string `flag:"curve-secret-key-file" yaml:"curve_secret_key_file" usage:"file with the engine's Z85 CURVE secret key: encrypts tcp:// connections"`
	// CurveAllowedClientsFile lists the frontends' public keys allowed to connect.
	CurveAllowedClientsFile string `flag:"curve-allowed-clients-file" yaml:"curve_allowed_clients_file" usage:"file with the Z85 public keys of frontends allowed to connect (one per line; needs --curve-secret-key-file)"`
	LogLevel                string `flag:"log-level" yaml:"log_level" usage:"log level: debug, info, warn or error"`
	// ProfileDir turns on the debugging profiler (off when empty): each
	// SIGUSR1 writes a Go execution trace and a CPU profile of the next
	// ProfileDuration into the directory.
	ProfileDir string `flag:"profile-dir" yaml:"profile_dir" usage:"debugging: on SIGUSR1, write a Go execution trace and a CPU profile of the next --profile-duration into this directory"`
	// ProfileDuration is how long one SIGUSR1 profile records.
	ProfileDuration time.Duration `flag:"profile-duration" yaml:"profile_duration" usage:"how long one --profile-dir recording (SIGUSR1) lasts"`
}

// DefaultEngine returns the defaults of every engine setting.
func DefaultEngine() Engine {
	return Engine{
		Listen:                     "ipc:///tmp/sluice-engine.sock",
		Executor:                   "cpu",
		MaxNumSeqs:                 256,
		MaxNumBatchedTokens:        2048,
		LongPrefillTokenThreshold:  "auto",
		PrefillTokensBesideDecodes: "auto",
		MaxNumPartialPrefills:      1,
		MaxLongPartialPrefills:     1,
		BlockSize:                  16,
		KVCacheDType:               "auto",
		SchedulerIdleWait:          "auto",
		SimVocabSize:               32000,
		ShutdownTimeout:            30 * time.Second,
		ConstraintTimeout:          10 * time.Second,
		GrammarCacheBytes:          128 << 20,        // guide.DefaultGrammarCacheBytes
		MaxGrammarBytes:            64 << 20,         // constraint.MaxGrammarBytes
		FrontendParkGrace:          30 * time.Second, // zmqtransport.DefaultParkGrace
		FrontendParkBufferBytes:    64 << 20,         // zmqtransport.DefaultParkBufferBytes
		LogFormat:                  "json",
		LogLevel:                   "info",
		ProfileDuration:            3 * time.Second,
	}
}

// Validate checks the settings, naming the offending flag.
func (e *Engine) Validate() error {
	var errs []error
	if e.Model == "" {
		errs = append(errs, Errorf("model", "is required"))
	}
	if e.Listen == "" {
		errs = append(errs, Errorf("listen", "is required (ipc:///path or tcp://host:port)"))
	}
	if e.Executor != "cpu" && e.Executor != "sim" && e.Executor != "cuda" {
		errs = append(errs, Errorf("executor", "must be cpu, cuda or sim, got %q", e.Executor))
	}
	if e.MaxNumSeqs < 1 {
		errs = append(errs, Errorf("max-num-seqs", "must be >= 1, got %d", e.MaxNumSeqs))
	}
	if e.MaxNumBatchedTokens < 1 {
		errs = append(errs, Errorf("max-num-batched-tokens", "must be >= 1, got %d", e.MaxNumBatchedTokens))
	}
	if _, err := e.LongPrefillThreshold(); err != nil {
		errs = append(errs, Errorf("long-prefill-token-threshold", "%v", err))
	}
	if _, err := e.PrefillBesideDecodes(); err != nil {
		errs = append(errs, Errorf("prefill-tokens-beside-decodes", "%v", err))
	}
	if e.MaxNumPartialPrefills < 1 {
		errs = append(errs, Errorf("max-num-partial-prefills", "must be >= 1, got %d", e.MaxNumPartialPrefills))
	}
	if e.MaxLongPartialPrefills < 1 || e.MaxLongPartialPrefills > max(e.MaxNumPartialPrefills, 1) {
		errs = append(errs, Errorf("max-long-partial-prefills", "must be in 1..--max-num-partial-prefills (%d), got %d", e.MaxNumPartialPrefills, e.MaxLongPartialPrefills))
	}
	if e.MaxModelLen < 0 || e.MaxModelLen == 1 {
		errs = append(errs, Errorf("max-model-len", "must be 0 (the model's) or >= 2, got %d", e.MaxModelLen))
	}
	if e.BlockSize < 1 || e.BlockSize > 1024 {
		errs = append(errs, Errorf("block-size", "must be in 1..1024, got %d", e.BlockSize))
	}
	if e.KVCacheMemory < 0 {
		errs = append(errs, Errorf("kv-cache-memory", "must be >= 0, got %d", e.KVCacheMemory))
	}
	switch e.KVCacheDType {
	case "", "auto", "float32", "fp32", "float16", "fp16", "half":
	default:
		errs = append(errs, Errorf("kv-cache-dtype", "must be auto, float32 or float16, got %q", e.KVCacheDType))
	}
	if _, err := e.IdleWait(); err != nil {
		errs = append(errs, Errorf("scheduler-idle-wait", "%v", err))
	}
	if e.NumKVBlocks < 0 {
		errs = append(errs, Errorf("num-kv-blocks", "must be >= 0, got %d", e.NumKVBlocks))
	}
	if e.Threads < 0 {
		errs = append(errs, Errorf("threads", "must be >= 0, got %d", e.Threads))
	}
	if e.SimStepMS < 0 {
		errs = append(errs, Errorf("sim-step-ms", "must be >= 0, got %g", e.SimStepMS))
	}
	if e.SimPrefillUSPerToken < 0 {
		errs = append(errs, Errorf("sim-prefill-us-per-token", "must be >= 0, got %g", e.SimPrefillUSPerToken))
	}
	if e.SimDecodeUSPerToken < 0 {
		errs = append(errs, Errorf("sim-decode-us-per-token", "must be >= 0, got %g", e.SimDecodeUSPerToken))
	}
	if e.SimEOSProb < 0 || e.SimEOSProb > 1 {
		errs = append(errs, Errorf("sim-eos-prob", "must be in [0, 1], got %g", e.SimEOSProb))
	}
	if e.SimTokenMin < 0 || e.SimTokenMax < 0 || (e.SimTokenMax > 0 && e.SimTokenMin > e.SimTokenMax) {
		errs = append(errs, Errorf("sim-token-min", "and --sim-token-max must satisfy 0 <= min <= max, got %d and %d", e.SimTokenMin, e.SimTokenMax))
	}
	if e.SimVocabSize < 1 {
		errs = append(errs, Errorf("sim-vocab-size", "must be >= 1, got %d", e.SimVocabSize))
	}
	if e.SimScript != "" && e.Executor != "sim" {
		errs = append(errs, Errorf("sim-script", "needs --executor sim"))
	}
	if e.MaxGrammarBytes <= 0 {
		errs = append(errs, Errorf("max-grammar-bytes", "must be > 0, got %d", e.MaxGrammarBytes))
	}
	if e.FrontendParkGrace <= 0 {
		errs = append(errs, Errorf("frontend-park-grace", "must be > 0, got %s", e.FrontendParkGrace))
	}
	if e.FrontendParkBufferBytes <= 0 {
		errs = append(errs, Errorf("frontend-park-buffer-bytes", "must be > 0, got %d", e.FrontendParkBufferBytes))
	}
	if e.GrammarCacheBytes <= 0 {
		errs = append(errs, Errorf("grammar-cache-bytes", "must be > 0, got %d", e.GrammarCacheBytes))
	}
	if e.ConstraintTimeout <= 0 {
		errs = append(errs, Errorf("constraint-timeout", "must be > 0, got %s", e.ConstraintTimeout))
	}
	if e.ProfileDuration <= 0 {
		errs = append(errs, Errorf("profile-duration", "must be > 0, got %s", e.ProfileDuration))
	}
	if e.ShutdownTimeout < 0 {
		errs = append(errs, Errorf("shutdown-timeout", "must be >= 0, got %s", e.ShutdownTimeout))
	}
	if e.LogFormat != "json" && e.LogFormat != "console" {
		errs = append(errs, Errorf("log-format", "must be json or console, got %q", e.LogFormat))
	}
	switch e.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, Errorf("log-level", "must be debug, info, warn or error, got %q", e.LogLevel))
	}
	return errors.Join(errs...)
}

// SimStep returns the simulator's fixed step time.
func (e *Engine) SimStep() time.Duration {
	return time.Duration(e.SimStepMS * float64(time.Millisecond))
}

// DefaultCPUIdleWait is --scheduler-idle-wait's auto value with the CPU
// executor: a CPU prefill of one short prompt takes 100 ms or more, so
// waiting 10 ms for the rest of a burst costs a lone request little, while
// a burst split into two steps makes the first request's second token wait
// for everyone else's prefill. A 16-request burst sent within 1 ms took
// 6–8 ms to reach a loaded engine (docs/bench/idle-window.md).
const DefaultCPUIdleWait = 10 * time.Millisecond

// IdleWait resolves --scheduler-idle-wait: auto (or empty) is
// DefaultCPUIdleWait with the CPU executor and 0 with sim (whose steps
// take microseconds unless --sim-step-ms says otherwise) and cuda (a GPU
// prefill step costs about as much as the window would).
func (e *Engine) IdleWait() (time.Duration, error) {
	if e.SchedulerIdleWait == "" || e.SchedulerIdleWait == "auto" {
		if e.Executor == "cpu" {
			return DefaultCPUIdleWait, nil
		}
		return 0, nil
	}
	d, err := time.ParseDuration(e.SchedulerIdleWait)
	if err != nil {
		return 0, fmt.Errorf("must be auto or a duration such as 5ms: %w", err)
	}
	if d < 0 || d > time.Minute {
		return 0, fmt.Errorf("must be between 0 and 1m, got %s", d)
	}
	return d, nil
}

// DefaultCPULongPrefillTokenThreshold is --long-prefill-token-threshold's
// auto value with the CPU executor. A CPU prefills a 1B model at about
// 190 tokens per second on two cores, so a 2048-token step holds every
// running stream's next token for 10 s or more; 256-token chunks hold it
// about 1.4 s, and the prefill's CPU per token is the same from 256- to
// 2048-token chunks (the runner works in passes of at most 256 rows), so a
// long prompt's time to first token hardly changes
// (docs/bench/long-prefill.md).
const DefaultCPULongPrefillTokenThreshold = 256

// LongPrefillThreshold resolves --long-prefill-token-threshold: auto (or
// empty) is DefaultCPULongPrefillTokenThreshold with the CPU executor and 0
// (no cap, vLLM's default) with sim and cuda; otherwise a number >= 0.
func (e *Engine) LongPrefillThreshold() (int, error) {
	return e.cpuTokens(e.LongPrefillTokenThreshold)
}

// PrefillBesideDecodes resolves --prefill-tokens-beside-decodes as
// LongPrefillThreshold does --long-prefill-token-threshold (auto: the same
// CPU value, so a step with decodes holds them one chunk's prefill).
func (e *Engine) PrefillBesideDecodes() (int, error) {
	return e.cpuTokens(e.PrefillTokensBesideDecodes)
}

// cpuTokens resolves a token count that is "auto" (or empty):
// DefaultCPULongPrefillTokenThreshold with the CPU executor, else 0; or a
// number >= 0.
func (e *Engine) cpuTokens(v string) (int, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "auto" {
		if e.Executor == "cpu" {
			return DefaultCPULongPrefillTokenThreshold, nil
		}
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("must be auto or a number >= 0, got %q", v)
	}
	return n, nil
}
