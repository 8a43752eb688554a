// Command bench is Sluice's load generator, a Go counterpart of
// `vllm bench serve` that works against any OpenAI-compatible server.
//
//	bench serve --base-url URL [--endpoint /v1/completions|/v1/chat/completions] --model NAME
//	      --dataset-name random --random-input-len N --random-output-len N --num-prompts N
//	      [--max-concurrency N] [--request-rate R] [--ignore-eos] [--result-json FILE] …
//	bench sweep --concurrencies 1,10,20,40 [serve flags] --output-dir DIR
//	bench stub-server [--port 8000] [--first-delay-ms 50] [--interval-ms 10] [--tokens-per-chunk 1]
//
// Run `bench serve -h` for every flag.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-llm/sluice/bench/serve"
	"github.com/sluice-llm/sluice/bench/stub"
	"github.com/sluice-llm/sluice/bench/sweep"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
		os.Exit(1)
	}
}

const usage = `usage: bench serve [flags]        benchmark an OpenAI-compatible server
       bench sweep [flags]        run serve over several concurrencies, write table, JSON, CSV, SVG
       bench stub-server [flags]  serve a scripted stub OpenAI server (for measuring the client)`

// multiValued lists the flags that take several space-separated values.
var multiValued = []string{"goodput"}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return errors.New("no command")
	}
	cmd, rest := args[0], serve.JoinMultiValued(args[1:], multiValued...)
	switch cmd {
	case "serve":
		o := serve.DefaultOptions()
		fs := flag.NewFlagSet("bench serve", flag.ContinueOnError)
		fs.SetOutput(stderr)
		raw := o.AddFlags(fs)
		if err := parse(fs, rest, raw, &o); err != nil {
			return err
		}
		_, err := serve.Run(ctx, o, stdout, stderr)
		return err
	case "sweep":
		so := sweep.Options{Serve: serve.DefaultOptions(), PromptsPerConcurrency: 4}
		so.Serve.NumPrompts = 0
		fs := flag.NewFlagSet("bench sweep", flag.ContinueOnError)
		fs.SetOutput(stderr)
		raw := so.Serve.AddFlags(fs)
		concs := fs.String("concurrencies", "1,10,20,40,70,100", "comma-separated --max-concurrency values")
		fs.IntVar(&so.PromptsPerConcurrency, "prompts-per-concurrency", so.PromptsPerConcurrency, "prompts per point = this × concurrency (at least --num-prompts)")
		fs.StringVar(&so.OutputDir, "output-dir", "sweep-results", "directory for sweep.json, sweep.csv, per-point results and SVG plots")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		so.MinPrompts = so.Serve.NumPrompts
		so.Serve.NumPrompts = 1 // validated per point
		var err error
		if so.Concurrencies, err = sweep.ParseConcurrencies(*concs); err != nil {
			return err
		}
		if err := finish(raw, &so.Serve); err != nil {
			return err
		}
		_, err = sweep.Run(ctx, so, stdout, stderr)
		return err
	case "stub-server":
		return stubServer(ctx, rest, stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	fmt.Fprintln(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

// parse parses serve flags and completes the options.
func parse(fs *flag.FlagSet, args []string, raw *serve.Flags, o *serve.Options) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return finish(raw, o)
}

// finish parses list flags and loads the tokenizer.
func finish(raw *serve.Flags, o *serve.Options) error {
	if err := raw.Finish(o); err != nil {
		return err
	}
	if o.TokenizerName != "" {
		tok, err := loadTokenizer(o.TokenizerName)
		if err != nil {
			return err
		}
		o.Tokenizer = tok
	}
	return nil
}

// stubServer serves the scripted stub until ctx ends.
func stubServer(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench stub-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8000", "listen address")
	first := fs.Float64("first-delay-ms", 50, "delay before the first chunk")
	interval := fs.Float64("interval-ms", 10, "delay between chunks")
	k := fs.Int("tokens-per-chunk", 1, "tokens per chunk")
	if err := fs.Parse(args); err != nil {
		return err
	}
	srv := &http.Server{
		Addr: *addr,
		Handler: stub.New(stub.Options{
			FirstDelay:     time.Duration(*first * float64(time.Millisecond)),
			Interval:       time.Duration(*interval * float64(time.Millisecond)),
			TokensPerChunk: *k,
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	fmt.Fprintf(stderr, "stub server listening on %s\n", *addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("stub server: %w", err)
	}
	return nil
}
