// Package frontend runs one api-frontend process from its configuration:
// it resolves the model, loads the tokenizer and chat templates, starts or
// dials the engines, serves the HTTP API until ctx ends and then drains.
// The command (api-frontend/main.go) only parses flags into a
// configs.Frontend and calls Run.
package frontend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // --pprof-addr serves http.DefaultServeMux
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/sluice-llm/sluice/api-frontend/engineclient"
	"github.com/sluice-llm/sluice/api-frontend/httpserve"
	"github.com/sluice-llm/sluice/api-frontend/launcher"
	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/api-frontend/procs"
	"github.com/sluice-llm/sluice/api-frontend/rawsock"
	"github.com/sluice-llm/sluice/api-frontend/server"
	"github.com/sluice-llm/sluice/api-frontend/sse"
	"github.com/sluice-llm/sluice/api-frontend/webui"
	"github.com/sluice-llm/sluice/configs"
	"github.com/sluice-llm/sluice/constraint"
	"github.com/sluice-llm/sluice/ipc/zmqtransport"
	"github.com/sluice-llm/sluice/modelfile/modelref"
	"github.com/sluice-llm/sluice/outputproc/harmony"
	"github.com/sluice-llm/sluice/outputproc/reasoning"
	"github.com/sluice-llm/sluice/outputproc/toolparse"
	"github.com/sluice-llm/sluice/text/chattemplate"
	"github.com/sluice-llm/sluice/text/tokenizer"
)

// Build identifies the binary (reported by /version).
type Build struct {
	Version, Commit string
}

// Run serves with cfg (already validated) until ctx ends. args are the
// command-line arguments, which a supervising process (--api-server-count
// above 1) passes on to the frontends it starts.
func Run(ctx context.Context, cfg *configs.Frontend, args []string, log *zap.Logger, b Build) error {
	if err := checkParsers(cfg.ToolCallParser, cfg.ReasoningParser); err != nil {
		return err
	}
	if cfg.APIServerCount > 1 {
		opts, err := launcher.FromFrontend(cfg, args, cfg.APIServerCount, log)
		if err != nil {
			return err
		}
		return launcher.Run(ctx, opts)
	}

	modelPath, err := modelref.Resolve(ctx, cfg.Model)
	if err != nil {
		return err
	}
	tok, err := tokenizer.Load(modelPath, cfg.Tokenizer)
	if err != nil {
		return fmt.Errorf("load tokenizer: %w", err)
	}
	info := tok.Info()
	templates := info.ChatTemplates
	if len(templates) == 0 && info.ChatTemplate != "" {
		templates = map[string]string{chattemplate.DefaultName: info.ChatTemplate}
	}
	if cfg.ChatTemplate != "" {
		if templates, err = chattemplate.Load(cfg.ChatTemplate); err != nil {
			return fmt.Errorf("load chat template: %w", err)
		}
	}
	renderer, err := server.NewTemplateRenderer(templates, info.BOSToken, info.EOSToken)
	if err != nil {
		return err
	}

	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(cfg.GCPercent)
	}
	pc := procsController(cfg.Procs, os.Getenv("GOMAXPROCS") != "", runtime.GOMAXPROCS(0))
	defer pc.Close()
	if cfg.PprofAddr != "" {
		go func() {
			// net/http/pprof registers on http.DefaultServeMux.
			if err := http.ListenAndServe(cfg.PprofAddr, nil); err != nil {
				log.Warn("pprof server", zap.Error(err))
			}
		}()
	}
	addrs := cfg.EngineAddrs()
	var child *exec.Cmd
	if addrs == nil {
		addr, cmd, cleanup, err := spawnEngine(cfg, log)
		if err != nil {
			return err
		}
		defer cleanup()
		child = cmd
		addrs = []string{addr}
	}
	served := cfg.ServedModelName
	if served == "" {
		served = cfg.Model
	}
	var curve *zmqtransport.CurveClient
	if cfg.EngineCurveKeyFile != "" {
		serverKey, err := zmqtransport.ReadKeyFile(cfg.EngineCurveKeyFile)
		if err != nil {
			return err
		}
		curve = &zmqtransport.CurveClient{ServerKey: serverKey}
		if cfg.CurveSecretKeyFile != "" {
			if curve.SecretKey, err = zmqtransport.ReadKeyFile(cfg.CurveSecretKeyFile); err != nil {
				return err
			}
		}
	}
	var conns []engineclient.EngineConn // each a *zmqtransport.EngineConn
	for _, a := range addrs {
		conn, err := zmqtransport.Dial(zmqtransport.ClientConfig{Addr: a, FrontendID: cfg.FrontendID, Log: log.Named("zmq"), LivenessTimeout: cfg.EngineLiveness, Curve: curve, LibZMQ: cfg.EngineLink == "libzmq"})
		if err != nil {
			return fmt.Errorf("dial engine %s: %w", a, err)
		}
		conns = append(conns, conn)
	}
	metrics := server.NewMetrics(served)
	jsonWS, err := constraint.ParseWhitespace(cfg.StructuredOutputsWhitespace)
	if err != nil {
		return fmt.Errorf("--structured-outputs-whitespace: %w", err)
	}
	store, sealer, closeStore, err := openResponseStore(cfg, log)
	if err != nil {
		return err
	}
	defer closeStore()
	var srv *server.Server
	client := engineclient.New(conns, engineclient.Options{
		OnBatch: metrics.Batch,
		OnState: func(engine int, up bool, reason string) {
			if srv != nil {
				srv.EngineState(engine, up, reason)
			}
		},
	})
	defer client.Close()
	srv = server.New(server.Config{
		ServedModelNames:     []string{served},
		ModelPath:            cfg.Model,
		StreamInterval:       cfg.StreamInterval,
		APIKey:               cfg.APIKey,
		MaxQueuedRequests:    cfg.MaxQueuedRequests,
		MaxStreamBufferBytes: cfg.MaxStreamBufferBytes,
		MaxBodyBytes:         cfg.MaxBodyBytes,
		RequestLimits: openai.RequestLimits{MaxStopStrings: cfg.MaxStopStrings, MaxStopStrBytes: cfg.MaxStopStrBytes, MaxLogitBias: cfg.MaxLogitBias,
			MaxSeqsPerRequest: cfg.MaxSeqsPerRequest, MaxTokenizeTokens: cfg.MaxTokenizeTokens, MaxGrammarBytes: cfg.MaxGrammarBytes},
		MaxTokenizeBodyBytes: cfg.MaxTokenizeBodyBytes,
		JSONWhitespace:       jsonWS,
		EnableAutoToolChoice: cfg.EnableAutoToolChoice,
		ToolCallParser:       cfg.ToolCallParser,
		ReasoningParser:      cfg.ReasoningParser,
		ReasoningField:       cfg.ReasoningField,
		NoSendBatch:          cfg.SendBatch == "off",
		FrontendID:           cfg.FrontendID,
		Version:              b.Version,
		Commit:               b.Commit,
	}, server.Deps{Engines: client, Tokenizer: tok, Chat: rendererOrNil(renderer), NewReasoning: reasoningFactory(cfg.ReasoningParser), Metrics: metrics, Log: log, Store: store, Sealer: sealer})
	client.Start()
	if cfg.WebUI {
		mountWebUI(srv, client, metrics, served, cfg)
	}

	if err := waitReady(ctx, client, child, cfg.EngineStartup); err != nil {
		return err
	}
	ln, err := launcher.Listen(cfg.Host, cfg.Port)
	if err != nil {
		return err
	}
	// Slow clients: headers must arrive within 30 s, bodies within 30 s
	// (server.readBody), and idle keep-alive connections close after 30 s.
	// No ReadTimeout/WriteTimeout: they would cut long streams.
	// ConnContext lets streams send on their sockets and keep the
	// connection alive (sse.Start).
	hs := newHTTPServer(cfg.HTTPServer, pc.Handler(srv.Handler()), log)
	errc := make(chan error, 1)
	// rawsock: the server's reads and writes skip the runtime's syscall
	// hooks (which wake sysmon after every idle gap).
	go func() { errc <- hs.Serve(rawsock.Listener(ln)) }()
	log.Info("serving", zap.String("addr", ln.Addr().String()), zap.String("model", served), zap.Strings("engines", addrs), zap.String("frontend_id", cfg.FrontendID))

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", zap.Duration("timeout", cfg.ShutdownTimeout))
	srv.BeginDrain()
	shutdownDone := make(chan error, 1)
	go func() { shutdownDone <- hs.Shutdown(context.Background()) }()
	wctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	if !srv.WaitStreams(wctx) {
		srv.EndStreams()
		// let the ended streams write their error event and [DONE]
		ectx, ecancel := context.WithTimeout(context.Background(), 5*time.Second)
		srv.WaitStreams(ectx)
		ecancel()
	}
	cancel()
	fctx, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	select {
	case <-shutdownDone:
	case <-fctx.Done():
		_ = hs.Close()
	}
	return nil
}

// procsController returns the GOMAXPROCS controller for --procs mode
// (api-frontend/procs), or nil (GOMAXPROCS left alone) with "all", when the
// environment sets GOMAXPROCS (envSet; the operator's or the launcher's
// choice) or with a single core (cores: the process's GOMAXPROCS at start).
func procsController(mode string, envSet bool, cores int) *procs.Controller {
	if mode == "all" || envSet || cores < 2 {
		return nil
	}
	return procs.New(procs.Policy{Narrow: 1, Wide: cores})
}

// httpServer is what Run needs of net/http's server and of httpserve's.
type httpServer interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Close() error
}

// newHTTPServer returns the --http-server's server for h: net/http's, or
// the lean one (api-frontend/httpserve), with the same settings.
func newHTTPServer(kind string, h http.Handler, log *zap.Logger) httpServer {
	if kind == "lean" {
		return &httpserve.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second,
			ConnContext: sse.ConnContext, ErrorLog: zap.NewStdLog(log)}
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second, ConnContext: sse.ConnContext}
}

func rendererOrNil(r *server.TemplateRenderer) server.ChatRenderer {
	if r == nil {
		return nil
	}
	return r
}

// waitReady waits until an engine is ready, the spawned engine exits, or the
// timeout passes.
func waitReady(ctx context.Context, c *engineclient.Client, child *exec.Cmd, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !c.Healthy() {
		if child != nil && child.ProcessState != nil {
			return fmt.Errorf("engine-core exited: %s", child.ProcessState)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no engine ready within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return errors.New("interrupted while waiting for the engine")
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// spawnEngine starts engine-core (next to this executable) on a private
// ipc:// socket and returns its address; cleanup kills it.
func spawnEngine(cfg *configs.Frontend, log *zap.Logger) (string, *exec.Cmd, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, nil, fmt.Errorf("find own executable: %w", err)
	}
	bin := filepath.Join(filepath.Dir(self), "engine-core")
	if _, err := os.Stat(bin); err != nil {
		return "", nil, nil, fmt.Errorf("--engine spawn needs engine-core next to api-frontend: %w", err)
	}
	dir, err := os.MkdirTemp("", "sluice-engine-")
	if err != nil {
		return "", nil, nil, fmt.Errorf("make socket dir: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", nil, nil, fmt.Errorf("chmod socket dir: %w", err)
	}
	addr := "ipc://" + filepath.Join(dir, "engine.sock")
	args := append([]string{"--model", cfg.Model, "--listen", addr}, cfg.SpawnArgs()...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, nil, fmt.Errorf("start engine-core: %w", err)
	}
	log.Info("spawned engine-core", zap.Int("pid", cmd.Process.Pid), zap.String("listen", addr), zap.String("args", strings.Join(args, " ")))
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	cleanup := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = os.RemoveAll(dir)
	}
	return addr, cmd, cleanup, nil
}

// mountWebUI serves the built-in web UI at /ui/ (outside the API-key check:
// the page must load before a key is typed, and its stats hold no prompts or
// outputs; the playground sends the key with its API calls).
func mountWebUI(srv *server.Server, client *engineclient.Client, metrics *server.Metrics, served string, cfg *configs.Frontend) {
	stats := func() any {
		st, err := webui.FromGatherer(metrics.Registry, served, cfg.FrontendID)
		if err != nil {
			return st
		}
		live := metrics.EngineStats()
		for i := range st.Engines {
			idx, err := strconv.Atoi(st.Engines[i].ID)
			if err != nil {
				continue
			}
			if s, ok := live[idx]; ok {
				up := st.Engines[i].Up
				st.Engines[i] = webui.EngineFromScheduler(st.Engines[i].ID, up, s)
			}
		}
		return st
	}
	ui := gin.WrapH(webui.Handler(webui.Options{Stats: stats, APIKeyRequired: cfg.APIKey != ""}))
	r := srv.Router()
	r.GET("/ui/*path", ui)
	r.HEAD("/ui/*path", ui)
}

// checkParsers fails at startup on unknown parser names. Harmony's names
// (openai, openai_gptoss) are served by outputproc/harmony.
func checkParsers(toolParser, reasoningParser string) error {
	if toolParser != "" && toolParser != harmony.ToolName {
		if _, err := toolparse.New(toolParser, nil, func() string { return "" }); err != nil {
			return fmt.Errorf("--tool-call-parser %s: %w", toolParser, err)
		}
	}
	if reasoningParser != "" && reasoningParser != harmony.ReasoningName {
		if _, err := reasoning.New(reasoningParser, reasoning.Options{}); err != nil {
			return fmt.Errorf("--reasoning-parser %s: %w", reasoningParser, err)
		}
	}
	return nil
}

// reasoningFactory returns the reasoning parser constructor for name, or nil.
func reasoningFactory(name string) func(*openai.Chat, string) (server.ReasoningParser, error) {
	if name == "" {
		return nil
	}
	if name == harmony.ReasoningName {
		// The server pairs harmony's reasoning and tool halves itself;
		// this stands for a choice that needs the reasoning half alone.
		return func(*openai.Chat, string) (server.ReasoningParser, error) {
			rp, _ := harmony.Pair(nil, func() string { return "" })
			return rp, nil
		}
	}
	return func(c *openai.Chat, prompt string) (server.ReasoningParser, error) {
		if v, ok := c.Kwargs["enable_thinking"].(bool); ok && !v {
			return nil, nil // thinking disabled: all output is content
		}
		opened := strings.HasSuffix(strings.TrimRight(prompt, " \n"), "<think>")
		p, err := reasoning.New(name, reasoning.Options{ThinkingOpenedInPrompt: opened})
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}
