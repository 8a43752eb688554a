// Package testproc is the real-process test harness shared by the suites
// that drive engine-core and api-frontend as child processes
// (api-frontend/e2etest, internal/reliability, api-frontend/launcher): it
// builds or locates the binaries, starts processes with their output kept,
// picks free loopback ports, waits for conditions such as /health, and
// stops everything at test cleanup.
package testproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RepoRoot returns the directory holding the module's go.mod, found by
// walking up from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getwd: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Build builds the main packages pkgs (paths relative to the module root,
// such as "./engine-core") into a fresh temporary directory and returns
// it; the caller removes it. The go tool's output goes to stderr. It is
// meant for TestMain, so it returns an error rather than failing a test.
func Build(prefix string, pkgs ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("build binaries: %w", err)
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", fmt.Errorf("build binaries: %w", err)
	}
	cmd := exec.Command("go", append([]string{"build", "-o", dir + string(os.PathSeparator)}, pkgs...)...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("build binaries: %w", err)
	}
	return dir, nil
}

// Proc is a started child process with its stdout and stderr kept.
type Proc struct {
	// Name is the binary's name, used in logs.
	Name string
	// Cmd is the running command.
	Cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	exited chan struct{}
}

// Options are the less common ways to start a process.
type Options struct {
	// Env is added to the test's environment.
	Env []string
	// NoDeathSig leaves the child running when the test binary dies (by
	// default it is SIGKILLed then, through Pdeathsig).
	NoDeathSig bool
	// Stop, when set, stops the process at cleanup instead of Kill.
	Stop func(*Proc)
	// TailOnFail is how many bytes of output a failed test logs (default
	// 4000).
	TailOnFail int
}

// Start runs path with args and registers a cleanup that stops it (Kill,
// or opt.Stop) and, if the test failed, logs the tail of its output.
func Start(t testing.TB, path string, opt Options, args ...string) *Proc {
	t.Helper()
	name := filepath.Base(path)
	p := &Proc{Name: name, exited: make(chan struct{})}
	p.Cmd = exec.Command(path, args...)
	p.Cmd.Stdout, p.Cmd.Stderr = p, p
	if len(opt.Env) > 0 {
		p.Cmd.Env = append(os.Environ(), opt.Env...)
	}
	if !opt.NoDeathSig {
		p.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.Cmd.Wait(); close(p.exited) }()
	n := opt.TailOnFail
	if n == 0 {
		n = 4000
	}
	t.Cleanup(func() {
		if opt.Stop != nil {
			opt.Stop(p)
		} else {
			p.Kill()
		}
		if t.Failed() {
			t.Logf("%s (pid %d) output:\n%s", name, p.Pid(), Tail(p.Output(), n))
		}
	})
	return p
}

// Write keeps b as output; it is the process's stdout and stderr.
func (p *Proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// Output returns everything the process wrote so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Exited is closed once the process has exited and been waited for.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Alive reports whether the process has not exited yet.
func (p *Proc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Signal sends sig unless the process has exited.
func (p *Proc) Signal(sig syscall.Signal) {
	if p.Alive() {
		_ = p.Cmd.Process.Signal(sig)
	}
}

// Kill SIGKILLs the process (resuming it first, in case it was stopped)
// and waits up to 10 s for it to exit.
func (p *Proc) Kill() {
	if !p.Alive() {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGCONT)
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
	}
}

// Tail returns the last n bytes of s, marked with "…" when cut.
func Tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// WaitFor polls cond every 20 ms until it holds, failing the test when
// timeout passes first; cond's detail is reported on failure.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s (last: %s)", what, timeout, detail)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// client is the harness's HTTP client: no proxy, loopback only.
var client = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

// HealthCode returns the status of GET base/health (2 s timeout).
func HealthCode(base string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
	if err != nil {
		return 0, fmt.Errorf("health request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("get health: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// WaitHealth waits until base/health answers want and returns how long it
// took.
func WaitHealth(t testing.TB, base string, want int, timeout time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	WaitFor(t, timeout, fmt.Sprintf("%s/health %d", base, want), func() (bool, string) {
		code, err := HealthCode(base)
		return code == want, fmt.Sprintf("status %d err %v", code, err)
	})
	return time.Since(t0)
}
