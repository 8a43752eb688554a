// Package e2etest drives real engine-core and api-frontend processes over
// real sockets: the engine with the simulated executor, one or two
// frontends, and clients speaking raw SSE and the official openai-go SDK.
package e2etest

import (
	"bufio"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/internal/testproc"
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
	dir, err := testproc.Build("sluice-e2e-bin-", "./engine-core", "./api-frontend")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a started child process with its combined output kept.
type proc = testproc.Proc

// start runs binDir/name with args until the test ends. With
// SLUICE_E2E_HTTP_SERVER set, every api-frontend gets --http-server with
// its value (lean: the tests run on api-frontend/httpserve).
func start(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	if v := os.Getenv("SLUICE_E2E_HTTP_SERVER"); v != "" && name == "api-frontend" {
		args = append([]string{"--http-server", v}, args...)
	}
	return testproc.Start(t, filepath.Join(binDir, name), testproc.Options{}, args...)
}

func tail(s string, n int) string { return testproc.Tail(s, n) }

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

func freePort(t testing.TB) int { return testproc.FreePort(t) }

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

func waitHealth(t testing.TB, base string, want int, timeout time.Duration) {
	t.Helper()
	testproc.WaitHealth(t, base, want, timeout)
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
