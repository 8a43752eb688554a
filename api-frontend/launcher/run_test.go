package launcher

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestRunRejectsBadOptions(t *testing.T) {
	args := func(FrontendSpec) []string { return nil }
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"no executable", Options{FrontendArgs: args, Count: 2, EngineAddr: "ipc:///x"}, "no frontend executable"},
		{"no args builder", Options{Executable: "/bin/true", Count: 2, EngineAddr: "ipc:///x"}, "no FrontendArgs"},
		{"zero count", Options{Executable: "/bin/true", FrontendArgs: args, EngineAddr: "ipc:///x"}, "must be >= 1"},
		{"no engine", Options{Executable: "/bin/true", FrontendArgs: args, Count: 2}, "neither an engine"},
		{"bad port", Options{Executable: "/bin/true", FrontendArgs: args, Count: 2, EngineAddr: "ipc:///x", Port: 70000}, "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Run(context.Background(), tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{Executable: "x", FrontendArgs: func(FrontendSpec) []string { return nil }, Count: 1, EngineAddr: "a"}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.ShutdownTimeout != DefaultShutdownTimeout || o.EngineStartupTimeout != DefaultEngineStartupTimeout ||
		o.RestartBackoff != DefaultRestartBackoff || o.MaxRestartBackoff != DefaultMaxRestartBackoff ||
		o.MinUptime != DefaultMinUptime || o.MaxQuickFailures != DefaultMaxQuickFailures ||
		o.Stdout == nil || o.Stderr == nil || o.Log == nil {
		t.Fatalf("defaults not applied: %+v", o)
	}
}

// syncBuffer is a bytes.Buffer safe for the children's writers and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// shFrontends returns Options whose frontends are shell loops that print
// "up <index> <restart> <pid>" and "bye <index>" on SIGTERM.
func shFrontends(out io.Writer, count int) Options {
	return Options{
		Executable: "/bin/sh",
		FrontendArgs: func(spec FrontendSpec) []string {
			return []string{"-c", fmt.Sprintf(`trap 'echo bye %d; exit 0' TERM; echo up %d %d $$; while :; do sleep 0.02; done`,
				spec.Index, spec.Index, spec.Restart)}
		},
		Count:          count,
		EngineAddr:     "ipc:///nonexistent",
		Host:           "127.0.0.1",
		RestartBackoff: 10 * time.Millisecond,
		Stdout:         out,
		Stderr:         out,
	}
}

// TestRunRestartsAndStops drives Run in-process (under -race in CI) with
// shell children: a killed child is restarted, and cancelling the context
// sends SIGTERM to every child and returns nil.
func TestRunRestartsAndStops(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, shFrontends(&out, 2)) }()

	upRE := regexp.MustCompile(`(?m)^frontend-(\d) \| up (\d) (\d+) (\d+)$`)
	waitFor(t, "two children up", 10*time.Second, func() bool { return len(upRE.FindAllString(out.String(), -1)) >= 2 })
	m := upRE.FindStringSubmatch(out.String())
	pid, _ := strconv.Atoi(m[4])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	restarted := regexp.MustCompile(`(?m)^frontend-` + m[1] + ` \| up ` + m[1] + ` 1 \d+$`)
	waitFor(t, "the killed child restarted", 10*time.Second, func() bool { return restarted.MatchString(out.String()) })

	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	for _, want := range []string{"frontend-1 | bye 1\n", "frontend-2 | bye 2\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunGivesUpOnQuickFailures(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out syncBuffer
	o := shFrontends(&out, 1)
	o.FrontendArgs = func(FrontendSpec) []string { return []string{"-c", "echo boom >&2; exit 3"} }
	o.MinUptime, o.MaxQuickFailures = time.Second, 3
	err := Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "frontend-1 exited 3 times in a row") || !strings.Contains(err.Error(), "\n    boom") {
		t.Fatalf("Run: %v, want it to give up after 3 quick failures relaying \"boom\"", err)
	}
	if n := strings.Count(out.String(), "frontend-1 | boom\n"); n != 3 {
		t.Errorf("%d starts passed through, want 3:\n%s", n, out.String())
	}
}

func TestRunEngineFailsBeforeReady(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out syncBuffer
	o := shFrontends(&out, 2)
	o.EngineAddr = ""
	o.EngineExecutable = "/bin/sh"
	o.EngineArgs = []string{"-c", "echo 'engine-core: KV cache too small' >&2; exit 1"}
	err := Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "engine-core exited (exit status 1) before it was ready") ||
		!strings.Contains(err.Error(), "\n    engine-core: KV cache too small") {
		t.Fatalf("Run: %v", err)
	}
	if strings.Contains(out.String(), "frontend-") {
		t.Errorf("frontends started although the engine failed:\n%s", out.String())
	}
}

func TestFrontendProcs(t *testing.T) {
	tests := []struct{ cores, count, want int }{
		{2, 1, 2}, {2, 2, 1}, {2, 3, 1}, {16, 3, 5}, {16, 4, 4}, {1, 8, 1}, {8, 0, 8},
	}
	for _, tt := range tests {
		if got := FrontendProcs(tt.cores, tt.count); got != tt.want {
			t.Errorf("FrontendProcs(%d, %d) = %d, want %d", tt.cores, tt.count, got, tt.want)
		}
	}
}

func TestFrontendEnv(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/root"}
	tests := []struct {
		name         string
		environ      []string
		cores, count int
		want         []string
	}{
		{"one frontend keeps the environment", base, 8, 1, base},
		{"two on two cores", base, 2, 2, append(slices.Clone(base), "GOMAXPROCS=1")},
		{"three on sixteen cores", base, 16, 3, append(slices.Clone(base), "GOMAXPROCS=5")},
		{"the operator's GOMAXPROCS stays", append(slices.Clone(base), "GOMAXPROCS=4"), 2, 2, append(slices.Clone(base), "GOMAXPROCS=4")},
		{"an empty environment", nil, 4, 2, []string{"GOMAXPROCS=2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.environ)
			got := frontendEnv(in, tt.cores, tt.count)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("frontendEnv = %q, want %q", got, tt.want)
			}
			if !slices.Equal(in, tt.environ) {
				t.Fatalf("frontendEnv changed its argument: %q", in)
			}
		})
	}
}

// TestRunSetsFrontendProcs: the children Run starts see
// Options.FrontendEnv, by default the launcher's environment plus their
// share of the cores.
func TestRunSetsFrontendProcs(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out syncBuffer
	o := shFrontends(&out, 2)
	o.FrontendArgs = func(spec FrontendSpec) []string {
		return []string{"-c", fmt.Sprintf(`trap 'exit 0' TERM; echo procs %d "$GOMAXPROCS"; while :; do sleep 0.02; done`, spec.Index)}
	}
	o.FrontendEnv = []string{"GOMAXPROCS=3"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, o) }()
	re := regexp.MustCompile(`(?m)^frontend-\d \| procs \d 3$`)
	waitFor(t, "two children with GOMAXPROCS=3", 10*time.Second, func() bool { return len(re.FindAllString(out.String(), -1)) >= 2 })
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}

	d := shFrontends(io.Discard, 2)
	if err := d.defaults(); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("GOMAXPROCS") == "" && !slices.Contains(d.FrontendEnv, "GOMAXPROCS="+strconv.Itoa(FrontendProcs(runtime.GOMAXPROCS(0), 2))) {
		t.Errorf("default FrontendEnv lacks the share: %q", d.FrontendEnv)
	}
}
