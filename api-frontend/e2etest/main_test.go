// Package e2etest drives real engine-core and api-frontend processes over
// real sockets: the engine with the simulated executor, one or two
// frontends, and clients speaking raw SSE and the official openai-go SDK.
package e2etest

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var binDir string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("SKIP: e2e tests need built binaries; not run with -short")
		os.Exit(0)
	}
	if dir := os.Getenv("SLUICE_E2E_BIN"); dir != "" {
		// prebuilt engine-core and api-frontend (for example from go build -o bin/)
		binDir = dir
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "sluice-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	root, err := repoRoot()
	if err == nil {
		cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "./engine-core", "./api-frontend")
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		err = cmd.Run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "build binaries:", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found")
		}
		dir = parent
	}
}

// proc is a started child process with its combined output kept.
type proc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    strings.Builder
	exited chan struct{}
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func start(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	p := &proc{exited: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(binDir, name), args...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, tail(p.output(), 4000))
		}
	})
	return p
}

func (p *proc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// engineAddr returns a fresh ipc:// address in a private directory.
func engineAddr(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return "ipc://" + filepath.Join(dir, "e.sock")
}

func startEngine(t testing.TB, addr string, extra ...string) *proc {
	args := append([]string{"--model", "demo", "--executor", "sim", "--listen", addr, "--log-format", "console"}, extra...)
	return start(t, "engine-core", args...)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startFrontend starts api-frontend against addr and waits for /health.
func startFrontend(t *testing.T, addr string, extra ...string) (string, *proc) {
	t.Helper()
	port := freePort(t)
	args := append([]string{"--model", "demo", "--engine", addr, "--host", "127.0.0.1", "--port", fmt.Sprint(port)}, extra...)
	p := start(t, "api-frontend", args...)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHealth(t, base, http.StatusOK, 60*time.Second)
	return base, p
}

func waitHealth(t *testing.T, base string, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/health did not become %d within %s (last err %v)", base, want, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sse reads an SSE body into data payloads.
func sse(t *testing.T, r *bufio.Reader) []string {
	t.Helper()
	var out []string
	for {
		line, err := r.ReadString('\n')
		line = strings.TrimRight(line, "\n")
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, d)
		}
		if err != nil {
			return out
		}
	}
}
