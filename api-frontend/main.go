// Command api-frontend is Sluice's OpenAI-compatible HTTP frontend. It
// tokenizes, streams and parses; generation runs in engine-core, which it
// either starts itself (--engine spawn, the default) or reaches at the
// addresses given (--engine ADDR[,ADDR2…], data parallel over several).
// main parses the flags into a configs.Frontend; package frontend runs it.
//
// Usage:
//
//	api-frontend --model M [--port 8000] [--host 0.0.0.0] [--engine spawn|ADDR[,ADDR2…]]
//	  [--served-model-name NAME] [--stream-interval N] [--api-key KEY]
//	  [--enable-auto-tool-choice] [--tool-call-parser NAME] [--reasoning-parser NAME]
//	  [--max-queued-requests N] [--chat-template FILE] [--tokenizer FILE]
//	  [--shutdown-timeout DUR] [--log-format text|json] [engine flags when spawning]
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sluice-llm/sluice/api-frontend/frontend"
	"github.com/sluice-llm/sluice/configs"
)

// Version and Commit are set with -ldflags "-X main.Version=… -X main.Commit=…".
var (
	Version = "dev"
	Commit  = "unknown"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "api-frontend:", err)
		os.Exit(1)
	}
}

// run is flags → config → frontend.Run.
func run(args []string) error {
	cfg := configs.DefaultFrontend()
	rest, err := configs.Load("api-frontend", args, &cfg, os.Stderr)
	if configs.IsHelp(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(rest, " "))
	}
	if cfg.FrontendID == "" {
		host, _ := os.Hostname()
		cfg.FrontendID = fmt.Sprintf("fe-%s-%d-%d", host, os.Getpid(), time.Now().UnixNano()%1e6)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log, err := newLogger(cfg.LogFormat)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return frontend.Run(ctx, &cfg, args, log, frontend.Build{Version: Version, Commit: Commit})
}

func newLogger(format string) (*zap.Logger, error) {
	zc := zap.NewProductionConfig()
	if format == "text" {
		zc.Encoding = "console"
		zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	}
	zc.Sampling = nil
	l, err := zc.Build()
	if err != nil {
		return nil, fmt.Errorf("build logger: %w", err)
	}
	return l, nil
}
