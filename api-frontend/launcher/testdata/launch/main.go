// Command launch is the launcher tests' stand-in for api-frontend's
// --api-server-count mode: it loads api-frontend's configuration (flags,
// SLUICE_* environment, --config) plus --api-server-count and hands over to
// launcher.Run as api-frontend's main does, the frontend children being the
// real api-frontend binary next to it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
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
	count, err := apiServerCount(args)
	if err != nil {
		return err
	}
	cfg := configs.DefaultFrontend()
	if _, err := configs.Load("launch", launcher.StripFlags(args, "api-server-count"), &cfg, os.Stderr); err != nil {
		return err
	}
	log, err := zap.NewDevelopment()
	if err != nil {
		return err
	}
	opts, err := launcher.FromFrontend(&cfg, args, count, log)
	if err != nil {
		return err
	}
	opts.Executable = filepath.Join(filepath.Dir(opts.Executable), "api-frontend")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return launcher.Run(ctx, opts)
}

// apiServerCount reads --api-server-count N (configs.Frontend may not know
// the flag yet).
func apiServerCount(args []string) (int, error) {
	for i, a := range args {
		if (a == "--api-server-count" || a == "-api-server-count") && i+1 < len(args) {
			n, err := strconv.Atoi(args[i+1])
			if err != nil {
				return 0, fmt.Errorf("--api-server-count: %w", err)
			}
			return n, nil
		}
	}
	return 1, nil
}
