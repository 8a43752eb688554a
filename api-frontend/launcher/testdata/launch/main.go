// Command launch is the launcher tests' stand-in for api-frontend's
// --api-server-count mode: it parses api-frontend's flags plus
// --api-server-count and hands over to launcher.Run exactly as
// api-frontend's main does, with the frontend children being the real
// api-frontend binary next to it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"go.uber.org/zap"

	"github.com/sluice-llm/sluice/api-frontend/launcher"
	"github.com/sluice-llm/sluice/configs"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "launch:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := configs.DefaultFrontend()
	fs := flag.NewFlagSet("launch", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	count := fs.Int("api-server-count", 1, "frontend processes sharing the port")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log, err := zap.NewDevelopment()
	if err != nil {
		return err
	}
	opts, err := launcher.FromFrontend(&cfg, args, *count, log)
	if err != nil {
		return err
	}
	opts.Executable = filepath.Join(filepath.Dir(opts.Executable), "api-frontend")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return launcher.Run(ctx, opts)
}
