// Package launcher is api-frontend's multi-process mode
// (--api-server-count N): the process becomes a supervisor that starts
// engine-core (with --engine spawn) and N frontend children listening on one
// port with SO_REUSEPORT, restarts children that die, and on SIGTERM drains
// the frontends before stopping the engine. Listen is the SO_REUSEPORT
// listener every frontend uses, launched or not.
package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-llm/sluice/ipc/zmqtransport"
)

// Defaults of the Options left zero.
const (
	DefaultShutdownTimeout      = 30 * time.Second
	DefaultEngineStartupTimeout = 5 * time.Minute
	DefaultRestartBackoff       = 250 * time.Millisecond
	DefaultMaxRestartBackoff    = 10 * time.Second
	DefaultMinUptime            = 5 * time.Second
	DefaultMaxQuickFailures     = 5
)

// stopGrace is how long a child may take beyond its drain time before it is
// killed.
const stopGrace = 10 * time.Second

// tailLines is how many of a child's last stderr lines an error relays.
const tailLines = 20

// FrontendSpec describes one frontend child to FrontendArgs.
type FrontendSpec struct {
	// Index is 1..Count; it stays the same across restarts.
	Index int
	// Restart is 0 for the first start and counts the restarts.
	Restart int
	// EngineAddr is the --engine value: the spawned engine's ipc://
	// address or Options.EngineAddr.
	EngineAddr string
	// Host and Port are the shared listening address (Port is resolved
	// when Options.Port is 0).
	Host string
	Port int
}

// Options configures Run.
type Options struct {
	// Executable is the frontend program started Count times.
	Executable string
	// FrontendArgs returns a frontend child's arguments; it must pass
	// spec's engine address, host, port and a frontend id unique to the
	// child (see the package-level FrontendArgs).
	FrontendArgs func(spec FrontendSpec) []string
	// Count is the number of frontend children (>= 1).
	Count int
	// EngineExecutable is engine-core; when set, Run starts it with
	// EngineArgs plus --listen on a private ipc:// socket and supervises
	// it. When empty, no engine is started and the children connect to
	// EngineAddr.
	EngineExecutable string
	EngineArgs       []string
	EngineAddr       string
	// Host and Port are where every frontend listens (SO_REUSEPORT). Port 0
	// picks a free port once for all of them.
	Host string
	Port int
	// ShutdownTimeout is the frontends' drain time (their
	// --shutdown-timeout): on shutdown a child still running after it plus
	// a grace period is killed.
	ShutdownTimeout time.Duration
	// EngineStartupTimeout bounds the wait for the engine's READY.
	EngineStartupTimeout time.Duration
	// RestartBackoff is the first delay before restarting a dead child; it
	// doubles on each quick failure up to MaxRestartBackoff.
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	// A child that exits within MinUptime of starting (the engine: before
	// READY) failed quickly; MaxQuickFailures of those in a row make Run
	// give up with the child's last output.
	MinUptime        time.Duration
	MaxQuickFailures int
	// Stdout and Stderr receive the children's output, each line prefixed
	// with the child's name ("engine-core | ", "frontend-2 | ") unless
	// RawOutput. Defaults: os.Stdout, os.Stderr.
	Stdout, Stderr io.Writer
	RawOutput      bool
	// Log receives the launcher's own events (default: none).
	Log *zap.Logger
	// FrontendEnv is each frontend child's environment (nil: the
	// launcher's own). Run sets it when nil: the launcher's environment
	// with GOMAXPROCS set to the child's share of the cores
	// (FrontendProcs), unless GOMAXPROCS is already set.
	FrontendEnv []string
}

// FrontendProcs is the GOMAXPROCS each of count frontend processes gets on
// cores usable cores: an equal share, at least 1, so that the frontends
// together run no more Go threads at once than there are cores. A Go
// process with a P more than it keeps busy pays for it on every hand-off
// between its goroutines (an idle P's thread is woken to look for the
// work, steals it or finds none, and sleeps again, and the work moves
// between the cores' caches): at 256 streams one frontend with one P spent
// 0.6–1.5 µs less CPU per streamed token than with two on two cores
// (docs/BENCHMARKS.md, "i23tok4"). A lone frontend keeps Go's default
// (all cores): its intake of a burst of requests then runs on every core.
func FrontendProcs(cores, count int) int {
	return max(1, cores/max(count, 1))
}

// frontendEnv returns the environment of count frontend children, given
// the launcher's environment and its usable cores: environ plus
// GOMAXPROCS=FrontendProcs(cores, count), or environ as it is when it sets
// GOMAXPROCS itself (the operator's choice) or count is 1.
func frontendEnv(environ []string, cores, count int) []string {
	if count <= 1 {
		return environ
	}
	for _, kv := range environ {
		if strings.HasPrefix(kv, "GOMAXPROCS=") {
			return environ
		}
	}
	return append(slices.Clip(environ), "GOMAXPROCS="+strconv.Itoa(FrontendProcs(cores, count)))
}

func (o *Options) defaults() error {
	if o.Executable == "" {
		return errors.New("launcher: no frontend executable")
	}
	if o.FrontendArgs == nil {
		return errors.New("launcher: no FrontendArgs")
	}
	if o.Count < 1 {
		return fmt.Errorf("launcher: --api-server-count must be >= 1, got %d", o.Count)
	}
	if o.EngineExecutable == "" && o.EngineAddr == "" {
		return errors.New("launcher: neither an engine to start nor an engine address")
	}
	if o.Port < 0 || o.Port > 65535 {
		return fmt.Errorf("launcher: port %d out of range", o.Port)
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.EngineStartupTimeout <= 0 {
		o.EngineStartupTimeout = DefaultEngineStartupTimeout
	}
	if o.RestartBackoff <= 0 {
		o.RestartBackoff = DefaultRestartBackoff
	}
	if o.MaxRestartBackoff < o.RestartBackoff {
		o.MaxRestartBackoff = max(DefaultMaxRestartBackoff, o.RestartBackoff)
	}
	if o.MinUptime <= 0 {
		o.MinUptime = DefaultMinUptime
	}
	if o.MaxQuickFailures <= 0 {
		o.MaxQuickFailures = DefaultMaxQuickFailures
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.FrontendEnv == nil {
		// runtime.GOMAXPROCS(0) is the cores this process may use (CPU
		// affinity and cgroup quota), as Go counts them.
		o.FrontendEnv = frontendEnv(os.Environ(), runtime.GOMAXPROCS(0), o.Count)
	}
	return nil
}

// Run starts the engine (when Options.EngineExecutable is set) and waits for
// its READY, then starts Count frontends sharing Host:Port, and supervises
// them until ctx is done: a frontend that exits is restarted with backoff; an
// engine that exits is restarted on the same socket (the frontends answer
// 503 meanwhile and reconnect by themselves). When ctx is done it sends
// SIGTERM to every frontend, waits for them to drain (up to
// ShutdownTimeout plus a grace period, then SIGKILL), then stops the engine
// the same way, and returns nil.
//
// Run returns an error, after stopping every child, when the port cannot be
// bound, when the engine exits before READY (the error carries its last
// output lines: a bad model path, a KV cache too small…), or when a child
// keeps failing right after it starts.
func Run(ctx context.Context, o Options) error {
	if err := o.defaults(); err != nil {
		return err
	}
	port, err := checkPort(o.Host, o.Port)
	if err != nil {
		return err
	}
	s := &supervisor{o: o, log: o.Log, port: port, engineAddr: o.EngineAddr,
		stopping: make(chan struct{}), fatal: make(chan error, o.Count+1)}
	return s.run(ctx)
}

// checkPort fails early when host:port cannot be shared (another program
// holds it without SO_REUSEPORT) and resolves port 0 to a free port.
func checkPort(host string, port int) (int, error) {
	ln, err := Listen(host, port)
	if err != nil {
		return 0, fmt.Errorf("launcher: port not available: %w", err)
	}
	p := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		return 0, fmt.Errorf("launcher: close port probe: %w", err)
	}
	return p, nil
}

// supervisor is one Run.
type supervisor struct {
	o          Options
	log        *zap.Logger
	port       int
	engineAddr string

	outMu    sync.Mutex    // whole lines on Stdout and Stderr
	stopping chan struct{} // closed when shutdown begins
	fatal    chan error    // a child gave up
}

func (s *supervisor) run(ctx context.Context) error {
	var engine *child
	if s.o.EngineExecutable != "" {
		dir, err := os.MkdirTemp("", "sluice-launch-")
		if err != nil {
			return fmt.Errorf("launcher: make socket dir: %w", err)
		}
		defer func() { _ = os.RemoveAll(dir) }()
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("launcher: chmod socket dir: %w", err)
		}
		s.engineAddr = "ipc://" + filepath.Join(dir, "engine.sock")
		if engine, err = s.startEngine(ctx); err != nil {
			return err
		}
	}

	engineStop := make(chan struct{})
	engineDone := make(chan struct{})
	if engine != nil {
		go func() { defer close(engineDone); s.superviseEngine(engine, engineStop) }()
	} else {
		close(engineDone)
	}
	var frontends sync.WaitGroup
	for i := 1; i <= s.o.Count; i++ {
		frontends.Add(1)
		go func() { defer frontends.Done(); s.superviseFrontend(i) }()
	}
	s.log.Info("launcher supervising", zap.String("host", s.o.Host), zap.Int("port", s.port),
		zap.Int("frontends", s.o.Count), zap.String("engine", s.engineAddr))

	var err error
	select {
	case <-ctx.Done():
		s.log.Info("launcher shutting down: draining frontends", zap.Duration("timeout", s.o.ShutdownTimeout))
	case err = <-s.fatal:
		s.log.Error("launcher giving up", zap.Error(err))
	}
	close(s.stopping)
	frontends.Wait()
	close(engineStop)
	<-engineDone
	s.log.Info("launcher stopped")
	return err
}

// child is one started process.
type child struct {
	name    string
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // closed once it exited and its output is flushed
	tail    *lineTail
}

// start starts a child whose output is passed through with its name, with
// env as its environment (nil: the launcher's).
func (s *supervisor) start(name, exe string, args, env []string) (*child, error) {
	c := &child{name: name, done: make(chan struct{}), tail: newLineTail(tailLines)}
	prefix := name + " | "
	if s.o.RawOutput {
		prefix = ""
	}
	stdout := &lineWriter{mu: &s.outMu, dst: s.o.Stdout, prefix: prefix, tail: c.tail}
	stderr := &lineWriter{mu: &s.outMu, dst: s.o.Stderr, prefix: prefix, tail: c.tail}
	c.cmd = exec.Command(exe, args...)
	c.cmd.Env = env
	c.cmd.Stdout, c.cmd.Stderr = stdout, stderr
	c.cmd.WaitDelay = time.Second
	// Own process group: a terminal's Ctrl-C reaches only the launcher,
	// which stops the children in order. Pdeathsig: no orphans if the
	// launcher itself is killed.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("launcher: start %s: %w", name, err)
	}
	c.started = time.Now()
	s.log.Info("started", zap.String("child", name), zap.Int("pid", c.cmd.Process.Pid),
		zap.String("args", strings.Join(redact(args), " ")))
	go func() {
		_ = c.cmd.Wait()
		stdout.Flush()
		stderr.Flush()
		close(c.done)
	}()
	return c, nil
}

// exited reports whether the child has exited.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// status describes how the child exited.
func (c *child) status() string {
	if c.cmd.ProcessState == nil {
		return "running"
	}
	return c.cmd.ProcessState.String()
}

// stop sends sig and waits up to wait for the child to exit, then kills it.
func (c *child) stop(sig syscall.Signal, wait time.Duration, log *zap.Logger) {
	if c.exited() {
		return
	}
	_ = c.cmd.Process.Signal(sig)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		log.Warn("child did not stop in time; killing it", zap.String("child", c.name), zap.Duration("waited", wait))
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// engineArgs returns engine-core's arguments with the launcher's --listen.
func (s *supervisor) engineArgs() []string {
	args := StripFlags(s.o.EngineArgs, "listen")
	return append(args, "--listen", s.engineAddr)
}

// startEngine starts engine-core and waits for its READY. It fails when the
// engine exits first, giving its last output lines.
func (s *supervisor) startEngine(ctx context.Context) (*child, error) {
	e, err := s.start("engine-core", s.o.EngineExecutable, s.engineArgs(), nil)
	if err != nil {
		return nil, err
	}
	if err := s.waitEngine(ctx, e, nil); err != nil {
		e.stop(syscall.SIGTERM, stopGrace, s.log)
		return nil, err
	}
	return e, nil
}

// waitEngine waits until the engine at s.engineAddr answers HELLO with
// READY, the child exits, ctx is done, stop is closed or the startup
// timeout passes.
func (s *supervisor) waitEngine(ctx context.Context, e *child, stop <-chan struct{}) error {
	probe, err := zmqtransport.Dial(zmqtransport.ClientConfig{
		Addr:       s.engineAddr,
		FrontendID: fmt.Sprintf("launcher-%d-probe", os.Getpid()),
		Log:        s.log.Named("probe"),
	})
	if err != nil {
		return fmt.Errorf("launcher: probe engine: %w", err)
	}
	defer probe.Close()
	deadline := time.NewTimer(s.o.EngineStartupTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if r, ok := probe.Ready(); ok {
			s.log.Info("engine ready", zap.String("engine_id", r.EngineID), zap.String("model", r.ModelName),
				zap.Int("kv_blocks", r.NumKVBlocks), zap.Duration("startup", time.Since(e.started)))
			return nil
		}
		select {
		case <-e.done:
			return fmt.Errorf("launcher: engine-core exited (%s) before it was ready; its last output:\n%s", e.status(), e.tail)
		case <-ctx.Done():
			return fmt.Errorf("launcher: interrupted while waiting for engine-core: %w", ctx.Err())
		case <-stop:
			return errors.New("launcher: stopped while waiting for engine-core")
		case <-deadline.C:
			return fmt.Errorf("launcher: engine-core not ready within %s; its last output:\n%s", s.o.EngineStartupTimeout, e.tail)
		case <-tick.C:
		}
	}
}

// superviseEngine restarts the engine when it dies until stop is closed,
// then stops it (after the frontends, which close stop).
func (s *supervisor) superviseEngine(e *child, stop <-chan struct{}) {
	backoff := s.o.RestartBackoff
	quick := 0
	for {
		select {
		case <-stop:
			e.stop(syscall.SIGTERM, s.o.ShutdownTimeout+stopGrace, s.log)
			s.log.Info("engine-core stopped", zap.String("status", e.status()))
			return
		case <-e.done:
		}
		if s.isStopping() {
			// Dying during shutdown: nothing left to serve.
			<-stop
			return
		}
		s.log.Error("engine-core exited; restarting it (frontends answer 503 meanwhile)",
			zap.String("status", e.status()), zap.Duration("backoff", backoff), zap.String("last_output", e.tail.String()))
		if !s.sleep(backoff, s.stopping) {
			<-stop // shutdown began: the frontends drain, nothing to restart
			return
		}
		_ = os.Remove(strings.TrimPrefix(s.engineAddr, "ipc://"))
		next, err := s.start("engine-core", s.o.EngineExecutable, s.engineArgs(), nil)
		if err != nil {
			s.giveUp(err)
			<-stop
			return
		}
		e = next
		err = s.waitEngine(context.Background(), e, stop)
		switch {
		case err == nil:
			quick, backoff = 0, s.o.RestartBackoff
		case s.isStopping():
			// the top of the loop stops it
		default:
			// Exited before READY, or hung past the startup timeout.
			if !e.exited() {
				e.stop(syscall.SIGKILL, stopGrace, s.log)
			}
			quick++
			backoff = min(2*backoff, s.o.MaxRestartBackoff)
			if quick >= s.o.MaxQuickFailures {
				s.giveUp(fmt.Errorf("launcher: engine-core failed %d restarts in a row: %w", quick, err))
				<-stop
				return
			}
		}
	}
}

// superviseFrontend runs frontend i until shutdown, restarting it when it
// exits.
func (s *supervisor) superviseFrontend(i int) {
	name := "frontend-" + strconv.Itoa(i)
	backoff := s.o.RestartBackoff
	quick := 0
	for restart := 0; ; restart++ {
		args := s.o.FrontendArgs(FrontendSpec{Index: i, Restart: restart, EngineAddr: s.engineAddr, Host: s.o.Host, Port: s.port})
		c, err := s.start(name, s.o.Executable, args, s.o.FrontendEnv)
		if err != nil {
			s.giveUp(err)
			return
		}
		select {
		case <-s.stopping:
			c.stop(syscall.SIGTERM, s.o.ShutdownTimeout+stopGrace, s.log)
			s.log.Info("frontend stopped", zap.String("child", name), zap.String("status", c.status()))
			return
		case <-c.done:
		}
		if s.isStopping() {
			return
		}
		if time.Since(c.started) >= s.o.MinUptime {
			quick, backoff = 0, s.o.RestartBackoff
		} else {
			quick++
		}
		if quick >= s.o.MaxQuickFailures {
			s.giveUp(fmt.Errorf("launcher: %s exited %d times in a row within %s of starting (%s); its last output:\n%s",
				name, quick, s.o.MinUptime, c.status(), c.tail))
			return
		}
		s.log.Warn("frontend exited; restarting it", zap.String("child", name), zap.String("status", c.status()),
			zap.Duration("backoff", backoff))
		if !s.sleep(backoff, s.stopping) {
			return
		}
		backoff = min(2*backoff, s.o.MaxRestartBackoff)
	}
}

func (s *supervisor) isStopping() bool {
	select {
	case <-s.stopping:
		return true
	default:
		return false
	}
}

// giveUp reports a fatal error to run (the first one wins).
func (s *supervisor) giveUp(err error) {
	select {
	case s.fatal <- err:
	default:
	}
}

// sleep waits d; it returns false if stop closed first.
func (s *supervisor) sleep(d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}
