// Package engine assembles and runs the engine-core process from its
// configuration: it loads the model (or sets up the simulated executor),
// sizes the KV cache, builds the scheduler and the constrained-decoding
// guide, binds the ZeroMQ socket and runs the core loop until a signal.
// engine-core's main only parses flags into a configs.Engine and calls Run.
package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sluice-llm/sluice/configs"
	"github.com/sluice-llm/sluice/engine-core/core"
	"github.com/sluice-llm/sluice/engine-core/cudaexec"
	"github.com/sluice-llm/sluice/engine-core/guide"
	"github.com/sluice-llm/sluice/engine-core/kvcache"
	"github.com/sluice-llm/sluice/engine-core/memstat"
	"github.com/sluice-llm/sluice/engine-core/runner"
	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/engine-core/sdnotify"
	"github.com/sluice-llm/sluice/engine-core/simexec"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/ipc/zmqtransport"
	"github.com/sluice-llm/sluice/kernels/cuda"
	"github.com/sluice-llm/sluice/modelfile/hfconfig"
	"github.com/sluice-llm/sluice/text/tokenizer"
)

// Run serves the engine configured by cfg until SIGTERM or SIGINT, logging
// to stderr, and returns the process exit status: 0 after a clean
// shutdown, 2 on bad configuration, 1 when the model cannot be loaded, the
// KV cache is too small or the engine loop fails.
func Run(cfg *configs.Engine, stderr io.Writer) int {
	log, err := newLogger(cfg.LogFormat, cfg.LogLevel, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "engine-core: %v\n", err)
		return 2
	}
	defer func() { _ = log.Sync() }()

	idleWait, err := cfg.IdleWait()
	if err != nil { // configs.Load validated it; a caller may not have
		fmt.Fprintf(stderr, "engine-core: --scheduler-idle-wait: %v\n", err)
		return 2
	}
	eng, err := build(cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "engine-core: %v\n", err)
		return 1
	}
	defer eng.close()
	logMemory(log, "after load")

	tcfg := zmqtransport.EngineConfig{Addr: cfg.Listen, Ready: eng.ready, Log: log.Named("transport"),
		ParkGrace: cfg.FrontendParkGrace, ParkBufferBytes: cfg.FrontendParkBufferBytes}
	if cfg.CurveSecretKeyFile != "" {
		secret, err := zmqtransport.ReadKeyFile(cfg.CurveSecretKeyFile)
		if err != nil {
			fmt.Fprintf(stderr, "engine-core: %v\n", err)
			return 2
		}
		tcfg.Curve = &zmqtransport.CurveServer{SecretKey: secret}
		if cfg.CurveAllowedClientsFile != "" {
			if tcfg.Curve.AllowedClients, err = zmqtransport.ReadKeyList(cfg.CurveAllowedClientsFile); err != nil {
				fmt.Fprintf(stderr, "engine-core: %v\n", err)
				return 2
			}
		}
	}
	sock, err := zmqtransport.Listen(tcfg)
	if err != nil {
		fmt.Fprintf(stderr, "engine-core: listen: %v\n", err)
		return 1
	}
	c, err := core.New(core.Options{
		EngineID:     eng.ready.EngineID,
		Sched:        eng.sched,
		Exec:         eng.exec,
		Transport:    sock,
		Log:          log.Named("core"),
		DrainTimeout: cfg.ShutdownTimeout,
		IdleWait:     idleWait,
	})
	if err != nil {
		sock.Close("engine failed to start")
		fmt.Fprintf(stderr, "engine-core: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		_, _ = sdnotify.Notify(sdnotify.Stopping)
	}()
	defer startProfiler(ctx, cfg.ProfileDir, cfg.ProfileDuration, log.Named("profile"), syscall.SIGUSR1)()
	log.Info("engine ready",
		zap.String("listen", cfg.Listen), zap.String("model", eng.ready.ModelName), zap.String("executor", cfg.Executor),
		zap.Int("max_model_len", eng.ready.MaxModelLen), zap.Int("vocab_size", eng.ready.VocabSize),
		zap.Int("kv_blocks", eng.ready.NumKVBlocks), zap.Int("block_size", eng.ready.BlockSize),
		zap.Int("max_num_seqs", cfg.MaxNumSeqs), zap.Int("max_num_batched_tokens", cfg.MaxNumBatchedTokens),
		zap.Int("long_prefill_token_threshold", eng.sched.Config().LongPrefillTokenThreshold),
		zap.Int("prefill_tokens_beside_decodes", eng.sched.Config().PrefillTokensBesideDecodes),
		zap.Int("max_num_partial_prefills", eng.sched.Config().MaxNumPartialPrefills),
		zap.Int("max_long_partial_prefills", eng.sched.Config().MaxLongPartialPrefills),
		zap.Duration("scheduler_idle_wait", idleWait))
	if _, err := sdnotify.Notify(sdnotify.Ready); err != nil {
		log.Warn("sd_notify", zap.Error(err))
	}
	if err := c.Run(ctx); err != nil {
		log.Error("engine loop failed", zap.Error(err))
		return 1
	}
	logMemory(log, "at stop")
	log.Info("engine stopped")
	return 0
}

// newLogger builds the process logger: JSON (default) or console.
func newLogger(format, level string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	var enc zapcore.Encoder
	if format == "console" {
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	} else {
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(ec)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), lvl)).Named("engine-core"), nil
}

// engine is what build assembles.
type engine struct {
	sched *sched.Scheduler
	exec  sched.Executor
	ready ipc.Ready
	close func()
}

// build loads the model (or sets up the simulator), sizes the KV cache and
// creates the scheduler.
func build(cfg *configs.Engine, log *zap.Logger) (*engine, error) {
	eng := &engine{close: func() {}}
	var (
		name     string
		vocab    int
		eos      []int32
		maxLen   int
		blocks   int
		window   int
		fpSource string
		// loadTok returns the tokenizer the guide's vocabulary is made
		// from; nil when there is none (no structured outputs)
		loadTok func() (tokenizer.Tokenizer, error)
	)
	switch cfg.Executor {
	case "cpu", "cuda":
		threads, procs := computeProcs(cfg.Threads, runtime.GOMAXPROCS(0))
		if procs != runtime.GOMAXPROCS(0) {
			runtime.GOMAXPROCS(procs)
		}
		rcfg := runner.Config{
			Model:          cfg.Model,
			NumBlocks:      cfg.NumKVBlocks,
			KVCacheBytes:   cfg.KVCacheMemory,
			KVCacheDType:   cfg.KVCacheDType,
			BlockSize:      cfg.BlockSize,
			Threads:        threads,
			MaxModelLen:    cfg.MaxModelLen,
			MaxBatchTokens: cfg.MaxNumBatchedTokens,
			MaxSeqs:        cfg.MaxNumSeqs,
			GroupMXFP4:     cfg.MXFP4GroupActivations,
			FutexSleep:     cfg.CPUFutexSleep,
		}
		var r interface {
			sched.Executor
			Info() runner.Info
			Close() error
		}
		var err error
		if cfg.Executor == "cuda" {
			// Only binaries built with -tags cuda (bin/engine-core-cuda)
			// have the backend; others get an error saying how to build it.
			r, err = cudaexec.New(rcfg, cuda.Options{})
		} else {
			r, err = runner.New(rcfg)
		}
		if err != nil {
			return nil, fmt.Errorf("load model %s: %w", cfg.Model, err)
		}
		info := r.Info()
		eng.exec = r
		eng.close = func() { _ = r.Close() }
		name, vocab, eos, maxLen, blocks, window = info.Name, info.VocabSize, info.EOS, info.MaxModelLen, info.NumBlocks, info.SlidingWindow
		if cfg.MaxModelLen > 0 {
			maxLen = min(maxLen, cfg.MaxModelLen)
		}
		// vLLM's "maximum concurrency": how many max_model_len sequences
		// the cache holds while they decode (a window table holds at most
		// ceil(window/block)+1 blocks then).
		perSeq := sched.KVBlocksFor(maxLen, cfg.BlockSize, 0, 0)
		if window > 0 {
			perSeq += min(perSeq, (window+cfg.BlockSize-1)/cfg.BlockSize+1)
		}
		log.Info("model loaded", zap.Int64("weight_bytes", info.WeightBytes), zap.Int64("kv_cache_bytes", info.KVCacheBytes),
			zap.Int64("scratch_bytes", info.ScratchBytes), zap.Int("scratch_rows", info.ScratchRows),
			zap.String("kv_cache_dtype", info.KVDType), zap.Int("kv_blocks", info.NumBlocks), zap.String("kv_budget", info.KVBudget),
			zap.Int("kv_sliding_window", window), zap.Float64("kv_bytes_per_token", float64(info.KVCacheBytes)*float64(perSeq)/float64(max(1, info.NumBlocks))/float64(maxLen)),
			zap.Float64("max_concurrency_at_max_model_len", float64(info.NumBlocks)/float64(perSeq)))
		fpSource = cfg.Model
		if p, err := runner.ResolveModel(cfg.Model); err == nil {
			fpSource = p
		}
		// the tokenizer is read in the background with the guide's
		// vocabulary (newLazyGuide), after the engine is ready
		tokPath := fpSource
		loadTok = func() (tokenizer.Tokenizer, error) {
			tm, err := tokenizer.Load(tokPath, cfg.Tokenizer)
			if err != nil {
				return nil, fmt.Errorf("no tokenizer: %w", err)
			}
			return tm, nil
		}
	case "sim":
		sim, err := buildSim(cfg, log)
		if err != nil {
			return nil, err
		}
		eng.exec = sim.exec
		name, vocab, eos, maxLen, blocks, window, fpSource = sim.name, sim.vocab, sim.eos, sim.maxLen, sim.blocks, sim.window, sim.path
		if sim.tok != nil {
			loadTok = func() (tokenizer.Tokenizer, error) { return sim.tok, nil }
		}
	default:
		return nil, fmt.Errorf("unknown executor %q", cfg.Executor)
	}
	if cfg.ServedModelName != "" {
		name = cfg.ServedModelName
	} else if name == "" {
		name = cfg.Model
	}
	if need := sched.KVBlocksFor(maxLen, cfg.BlockSize, window, cfg.MaxNumBatchedTokens); blocks < need {
		eng.close()
		return nil, fmt.Errorf("KV cache too small: %d blocks of %d positions, but one max_model_len (%d) sequence needs %d blocks (sliding window %d); raise --kv-cache-memory or --num-kv-blocks, or lower --max-model-len",
			blocks, cfg.BlockSize, maxLen, need, window)
	}
	var g sched.Guide
	if loadTok != nil {
		g = newLazyGuide(log, func() (*guideAdapter, error) {
			tok, err := loadTok()
			if err != nil {
				return nil, err
			}
			gv, err := guide.FromTokenizer(tok, eos...)
			if err != nil {
				return nil, err
			}
			return &guideAdapter{c: guide.NewCompilerWithOptions(gv, guide.Options{CacheSize: 64, CacheBytes: cfg.GrammarCacheBytes, MaxGrammarBytes: cfg.MaxGrammarBytes}), size: gv.Size(), timeout: cfg.ConstraintTimeout}, nil
		})
	}
	longPrefill, err := cfg.LongPrefillThreshold()
	if err != nil {
		eng.close()
		return nil, fmt.Errorf("--long-prefill-token-threshold: %w", err)
	}
	beside, err := cfg.PrefillBesideDecodes()
	if err != nil {
		eng.close()
		return nil, fmt.Errorf("--prefill-tokens-beside-decodes: %w", err)
	}
	pool := kvcache.New(blocks, cfg.BlockSize)
	eng.sched = sched.New(sched.Config{
		Guide:                      g,
		MaxNumSeqs:                 cfg.MaxNumSeqs,
		MaxNumBatchedTokens:        cfg.MaxNumBatchedTokens,
		LongPrefillTokenThreshold:  longPrefill,
		PrefillTokensBesideDecodes: beside,
		MaxNumPartialPrefills:      cfg.MaxNumPartialPrefills,
		MaxLongPartialPrefills:     cfg.MaxLongPartialPrefills,
		MaxModelLen:                maxLen,
		VocabSize:                  vocab,
		EOSTokenIDs:                eos,
		DisablePrefixCaching:       cfg.DisablePrefixCaching,
		Seed:                       uint64(cfg.Seed),
		SlidingWindow:              window,
	}, pool)
	id := cfg.EngineID
	if id == "" {
		host, _ := os.Hostname()
		id = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	eng.ready = ipc.Ready{
		EngineID:         id,
		ModelName:        name,
		MaxModelLen:      maxLen,
		VocabSize:        vocab,
		EOSTokenIDs:      eos,
		BlockSize:        cfg.BlockSize,
		NumKVBlocks:      blocks,
		PID:              os.Getpid(),
		ModelFingerprint: fingerprint(cfg.Executor, fpSource),
	}
	return eng, nil
}

type simSetup struct {
	exec   *simexec.Executor
	tok    tokenizer.Tokenizer
	name   string
	path   string
	vocab  int
	eos    []int32
	maxLen int
	blocks int
	window int // sliding window with its own block table, 0 when none
}

// simKVBlock is the bytes of one KV block (K and V, fp16) of the model
// config.json describes, as the cpu executor lays its cache out: a model
// with both sliding-window and full layers (gpt-oss) gets a window table,
// and a block holds one group's layers (the larger group's count); window
// is then the sliding window, else 0.
func simKVBlock(hc *hfconfig.Config, blockSize int) (perBlock int64, window int) {
	headDim := hc.HeadDim
	if headDim == 0 && hc.NumAttentionHeads > 0 {
		headDim = hc.HiddenSize / hc.NumAttentionHeads
	}
	kvHeads := max(hc.NumKeyValueHeads, 1)
	if hc.NumKeyValueHeads == 0 {
		kvHeads = max(hc.NumAttentionHeads, 1)
	}
	layers, sliding := hc.NumHiddenLayers, 0
	for _, t := range hc.LayerTypes {
		if t == "sliding_attention" {
			sliding++
		}
	}
	if hc.SlidingWindow > 0 && sliding > 0 && sliding < len(hc.LayerTypes) {
		layers, window = max(sliding, len(hc.LayerTypes)-sliding), hc.SlidingWindow
	}
	return int64(2 * 2 * layers * kvHeads * headDim * blockSize), window
}

// buildSim sets up the simulated accelerator. --model sim runs without a
// tokenizer (vocabulary --sim-vocab-size); any other model provides its
// tokenizer (for scripts and readable tokens), vocabulary, EOS ids and
// context length, and no weights are loaded.
func buildSim(cfg *configs.Engine, log *zap.Logger) (*simSetup, error) {
	s := &simSetup{name: cfg.Model, path: cfg.Model, vocab: cfg.SimVocabSize, maxLen: 4096}
	var tok tokenizer.Tokenizer
	if cfg.Model != "sim" {
		path, err := runner.ResolveModel(cfg.Model)
		if err != nil {
			return nil, fmt.Errorf("resolve model %s: %w", cfg.Model, err)
		}
		s.path = path
		tm, err := tokenizer.Load(path, cfg.Tokenizer)
		if err != nil {
			return nil, fmt.Errorf("load tokenizer of %s: %w", cfg.Model, err)
		}
		tok = tm
		s.vocab = tm.VocabSize()
		s.eos = tm.Info().EOSIDs
		if hc, err := hfconfig.Load(path); err == nil {
			if hc.MaxPositionEmbeddings > 0 {
				s.maxLen = hc.MaxPositionEmbeddings
			}
			if hc.VocabSize > s.vocab {
				s.vocab = hc.VocabSize
			}
			if len(s.eos) == 0 {
				s.eos = hc.EOSTokenIDs
			}
			s.name = filepath.Base(path)
			if strings.HasPrefix(cfg.Model, "demo") {
				s.name = cfg.Model
			}
			perBlock, window := simKVBlock(hc, cfg.BlockSize)
			s.window = window
			if cfg.KVCacheMemory > 0 && cfg.NumKVBlocks == 0 && perBlock > 0 {
				s.blocks = int(cfg.KVCacheMemory / perBlock)
			}
		} else {
			log.Warn("no config.json for the simulator; using defaults", zap.String("model", path), zap.Error(err))
		}
	}
	if cfg.MaxModelLen > 0 {
		s.maxLen = cfg.MaxModelLen
	}
	if cfg.NumKVBlocks > 0 {
		s.blocks = cfg.NumKVBlocks
	}
	if s.blocks == 0 {
		s.blocks = cfg.MaxNumSeqs * ((s.maxLen + cfg.BlockSize - 1) / cfg.BlockSize)
	}
	var script []simexec.ScriptEntry
	if cfg.SimScript != "" {
		if tok == nil {
			return nil, errors.New("--sim-script needs a tokenizer: give a model directory (or demo) rather than --model sim")
		}
		var err error
		if script, err = simexec.LoadScript(cfg.SimScript); err != nil {
			return nil, err
		}
	}
	ex, err := simexec.New(simexec.Config{
		VocabSize:       s.vocab,
		EOSTokenIDs:     s.eos,
		TokenMin:        int32(cfg.SimTokenMin),
		TokenMax:        int32(cfg.SimTokenMax),
		EOSProb:         cfg.SimEOSProb,
		StepTime:        cfg.SimStep(),
		PrefillPerToken: time.Duration(cfg.SimPrefillUSPerToken * float64(time.Microsecond)),
		DecodePerToken:  time.Duration(cfg.SimDecodeUSPerToken * float64(time.Microsecond)),
		Script:          script,
		Tokenizer:       tok,
	})
	if err != nil {
		return nil, err
	}
	s.exec = ex
	s.tok = tok
	return s, nil
}

// computeProcs returns the compute threads for --threads (0: every
// processor Go schedules on, gomaxprocs) and the GOMAXPROCS to run with:
// at least one more than the compute threads, so that the transport's
// goroutines (pings, frontend frames) always find a processor. The
// compute goroutines run assembly, which the Go scheduler cannot preempt,
// and a kernel stalled on page faults (weights read back from disk when
// the file does not fit in the page cache: an 8B F16 model on a 23 GiB
// machine) holds its processor for seconds; with every processor held,
// the engine sent nothing for longer than the frontends' liveness timeout
// (3 s) and they declared it down mid-request.
func computeProcs(threads, gomaxprocs int) (compute, procs int) {
	compute = threads
	if compute <= 0 {
		compute = gomaxprocs
	}
	return compute, max(gomaxprocs, compute+1)
}

// lazyGuide is a sched.Guide whose vocabulary (the tokenizer read from
// the model file, then guide.FromTokenizer: 0.1–0.3 CPU-s for 32k–128k
// tokens) is built on a goroutine of its own from engine start, so that
// the engine is ready without waiting for it; the first constrained
// request waits for it on the engine loop.
type lazyGuide struct {
	done chan struct{} // closed once g or err is set
	g    *guideAdapter
	err  error
}

// newLazyGuide starts build and returns the guide that waits for it. A
// failure is logged once and refuses every constrained request.
func newLazyGuide(log *zap.Logger, build func() (*guideAdapter, error)) *lazyGuide {
	l := &lazyGuide{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		if l.g, l.err = build(); l.err != nil {
			log.Warn("structured outputs are disabled", zap.Error(l.err))
			l.err = fmt.Errorf("structured outputs are disabled: %w", l.err)
		}
	}()
	return l
}

// NewMatcher waits for the vocabulary, then compiles c.
func (l *lazyGuide) NewMatcher(c *ipc.Constraint) (sched.Matcher, error) {
	<-l.done
	if l.err != nil {
		return nil, l.err
	}
	return l.g.NewMatcher(c)
}

// guideAdapter serves sched.Guide with engine-core/guide. Compilation runs
// on the engine loop (bounded by --constraint-timeout; compiled grammars
// are cached).
type guideAdapter struct {
	c       *guide.Compiler
	size    int
	timeout time.Duration
}

func (g *guideAdapter) NewMatcher(ct *ipc.Constraint) (sched.Matcher, error) {
	m, err := g.c.Matcher(*ct, time.Now().Add(g.timeout))
	if err != nil {
		return nil, err
	}
	return &guideMatcher{m: m, mask: guide.NewBitmask(g.size)}, nil
}

type guideMatcher struct {
	m    *guide.Matcher
	mask *guide.Bitmask
}

func (g *guideMatcher) Mask() sample.Mask {
	g.m.Mask(g.mask)
	return g.mask
}
func (g *guideMatcher) Accept(tok int32) error { return g.m.Accept(tok) }
func (g *guideMatcher) IsDone() bool           { return g.m.IsDone() }

// fingerprint identifies the served weights: executor, resolved path, and
// the size and modification time of what lies there.
func fingerprint(executor, path string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s", executor, path)
	if st, err := os.Stat(path); err == nil {
		fmt.Fprintf(h, "\x00%d\x00%d", st.Size(), st.ModTime().UnixNano())
		if st.IsDir() {
			entries, _ := os.ReadDir(path)
			for _, e := range entries {
				if info, err := e.Info(); err == nil {
					fmt.Fprintf(h, "\x00%s\x00%d\x00%d", e.Name(), info.Size(), info.ModTime().UnixNano())
				}
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// logMemory logs where the process's resident memory is (memstat): the
// kernel's resident, anonymous and file-backed bytes (the mapped weights
// are file-backed; the KV cache and activations are Go heap objects) and
// the Go runtime's classes.
func logMemory(log *zap.Logger, when string) {
	g := memstat.ReadGo()
	fields := []zap.Field{zap.String("when", when),
		zap.Int64("go_heap_objects", g.HeapObjects), zap.Int64("go_heap_idle", g.HeapIdle), zap.Int64("go_heap_released", g.HeapReleased),
		zap.Int64("go_stacks", g.Stacks), zap.Int64("go_runtime", g.Runtime)}
	if r, err := memstat.ReadRollup(); err == nil {
		fields = append(fields, zap.Int64("rss", r.Rss), zap.Int64("rss_anon", r.Anonymous), zap.Int64("rss_file", r.File))
	} else {
		fields = append(fields, zap.NamedError("rss_error", err))
	}
	log.Info("memory", fields...)
}
