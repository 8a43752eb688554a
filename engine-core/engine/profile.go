package engine

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"time"

	"go.uber.org/zap"
)

// profiler records, on each signal from sig (SIGUSR1 in Run), a Go
// execution trace and a CPU profile of the next d into dir: the engine's
// counterpart of vLLM's VLLM_TORCH_PROFILER_DIR, for finding where a step's
// wall time goes (scheduler latency of the compute goroutines: `go tool
// trace -pprof=sched FILE`; serial work between kernels: the CPU
// profile). Signals that arrive while a recording runs are dropped.
type profiler struct {
	dir string
	d   time.Duration
	log *zap.Logger
	now func() time.Time
}

// run serves signals from sig until ctx ends.
func (p *profiler) run(ctx context.Context, sig <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
		}
		tr, cpu, err := p.record(ctx)
		if err != nil {
			p.log.Warn("profile failed", zap.Error(err))
			continue
		}
		p.log.Info("profile written", zap.String("trace", tr), zap.String("cpu_profile", cpu), zap.Duration("duration", p.d))
		for len(sig) > 0 {
			<-sig
		}
	}
}

// record writes one trace and CPU profile of p.d (less if ctx ends) and
// returns their paths.
func (p *profiler) record(ctx context.Context) (tracePath, cpuPath string, err error) {
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return "", "", fmt.Errorf("create profile dir: %w", err)
	}
	stamp := p.now().UTC().Format("20060102T150405.000")
	tracePath = filepath.Join(p.dir, "trace-"+stamp+".out")
	cpuPath = filepath.Join(p.dir, "cpu-"+stamp+".pprof")
	tf, err := os.Create(tracePath)
	if err != nil {
		return "", "", fmt.Errorf("create trace file: %w", err)
	}
	defer tf.Close()
	cf, err := os.Create(cpuPath)
	if err != nil {
		return "", "", fmt.Errorf("create CPU profile: %w", err)
	}
	defer cf.Close()
	if err := pprof.StartCPUProfile(cf); err != nil {
		return "", "", fmt.Errorf("start CPU profile: %w", err)
	}
	if err := trace.Start(tf); err != nil {
		pprof.StopCPUProfile()
		return "", "", fmt.Errorf("start trace: %w", err)
	}
	t := time.NewTimer(p.d)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	trace.Stop()
	pprof.StopCPUProfile()
	if err := tf.Close(); err != nil {
		return "", "", fmt.Errorf("write trace: %w", err)
	}
	if err := cf.Close(); err != nil {
		return "", "", fmt.Errorf("write CPU profile: %w", err)
	}
	return tracePath, cpuPath, nil
}

// startProfiler starts the --profile-dir profiler on sig's signals (none
// when dir is empty) and returns the function that stops it.
func startProfiler(ctx context.Context, dir string, d time.Duration, log *zap.Logger, sig ...os.Signal) (stop func()) {
	if dir == "" {
		return func() {}
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sig...)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	p := &profiler{dir: dir, d: d, log: log, now: time.Now}
	go func() {
		defer close(done)
		p.run(ctx, ch)
	}()
	log.Info("profiler on: send SIGUSR1 to record", zap.String("dir", dir), zap.Duration("duration", d), zap.Int("pid", os.Getpid()))
	return func() {
		signal.Stop(ch)
		cancel()
		<-done
	}
}
