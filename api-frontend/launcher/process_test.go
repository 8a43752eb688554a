package launcher

// Tests with real processes: engine-core with the simulated executor, the
// real api-frontend as the frontend children, and as the launcher
// api-frontend itself when it knows --api-server-count, otherwise
// testdata/launch (which hands its flags to FromFrontend and Run the way
// api-frontend's main does).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/internal/testproc"
)

var (
	binDir      string
	launcherBin string // "api-frontend" or "launch"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // process tests skip themselves
	}
	dir, err := testproc.Build("sluice-launcher-bin-",
		"./engine-core", "./api-frontend", "./api-frontend/launcher/testdata/launch")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	launcherBin = "launch"
	help, _ := exec.Command(filepath.Join(dir, "api-frontend"), "--help").CombinedOutput()
	if strings.Contains(string(help), "-api-server-count") {
		launcherBin = "api-frontend"
	}
	fmt.Fprintln(os.Stderr, "launcher tests: the launcher is", launcherBin)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func needBinaries(t *testing.T) {
	t.Helper()
	if binDir == "" {
		t.Skip("process test: needs the binaries built by TestMain (not with -short)")
	}
}

// launcherProc is a running testdata/launch with its output kept.
type launcherProc struct{ *testproc.Proc }

// startLauncher runs the launcher with the demo model on the simulated
// executor plus extra flags, and returns it with its base URL.
func startLauncher(t *testing.T, extra ...string) (*launcherProc, string) {
	t.Helper()
	needBinaries(t)
	port := freePort(t)
	args := append([]string{"--model", "demo", "--executor", "sim", "--host", "127.0.0.1", "--port", strconv.Itoa(port)}, extra...)
	p := testproc.Start(t, filepath.Join(binDir, launcherBin), testproc.Options{
		NoDeathSig: true,
		TailOnFail: 6000,
		// SIGTERM lets it stop its children and remove its socket
		// directory; SIGKILL if that hangs (the children die with it:
		// Pdeathsig).
		Stop: func(p *testproc.Proc) {
			p.Signal(syscall.SIGTERM)
			select {
			case <-p.Exited():
			case <-time.After(15 * time.Second):
				p.Kill()
			}
		},
	}, args...)
	return &launcherProc{p}, fmt.Sprintf("http://127.0.0.1:%d", port)
}

// wait waits for the launcher to exit and returns its exit code.
func (p *launcherProc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.Exited():
		return p.Cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("launcher still running after %s", timeout)
		return -1
	}
}

func freePort(t *testing.T) int { return testproc.FreePort(t) }

func waitHealth(t *testing.T, base string, timeout time.Duration) {
	t.Helper()
	testproc.WaitHealth(t, base, http.StatusOK, timeout)
}

// waitFrontends waits until n distinct frontend processes have answered
// /version on fresh connections, i.e. all of them listen.
func waitFrontends(t *testing.T, base string, n int) {
	t.Helper()
	seen := map[int]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d frontends answered /version within 30s", len(seen), n)
		}
		if v, err := freshVersion(base); err == nil {
			seen[v.PID] = true
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type versionInfo struct {
	FrontendID string `json:"frontend_id"`
	PID        int    `json:"pid"`
}

// getVersion asks /version over c.
func getVersion(c *http.Client, base string) (versionInfo, error) {
	var v versionInfo
	resp, err := c.Get(base + "/version")
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("/version: status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return v, fmt.Errorf("/version: %w", err)
	}
	return v, nil
}

// freshVersion asks /version on a new connection.
func freshVersion(base string) (versionInfo, error) {
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	return getVersion(&http.Client{Transport: tr, Timeout: 5 * time.Second}, base)
}

// stream is one completion stream on its own connection, attributed to
// the frontend process that accepted that connection.
type stream struct {
	frontend versionInfo
	body     io.ReadCloser
	r        *bufio.Reader
	tr       *http.Transport
}

// openStream connects, asks /version, then posts a streamed completion on
// the same connection, so the stream's frontend is known. It returns once
// the response headers arrived, or nil after reporting an error.
func openStream(t *testing.T, base string, maxTokens int) *stream {
	t.Helper()
	s, err := tryOpenStream(base, maxTokens)
	if err != nil {
		t.Errorf("open stream: %v", err)
		return nil
	}
	return s
}

func tryOpenStream(base string, maxTokens int) (*stream, error) {
	tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, DisableCompression: true}
	c := &http.Client{Transport: tr}
	v, err := getVersion(c, base)
	if err != nil {
		return nil, err
	}
	reused := false
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
	})
	body := fmt.Sprintf(`{"model":"demo","prompt":"Once upon a time","max_tokens":%d,"stream":true,`+
		`"stream_options":{"include_usage":true}}`, maxTokens)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("post completion: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("completion: status %d: %s", resp.StatusCode, b)
	}
	if !reused {
		resp.Body.Close()
		return nil, errors.New("completion did not reuse the /version connection: its frontend is unknown")
	}
	return &stream{frontend: v, body: resp.Body, r: bufio.NewReader(resp.Body), tr: tr}, nil
}

// next returns the next SSE data payload.
func (s *stream) next() (string, error) {
	for {
		line, err := s.r.ReadString('\n')
		if d, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "data: "); ok {
			return d, nil
		}
		if err != nil {
			return "", err
		}
	}
}

// result reads the stream to its end.
type result struct {
	tokens int    // usage.completion_tokens of the final chunk
	done   bool   // ended with data: [DONE]
	errMsg string // an error event's message
	err    error  // a transport error (stream cut)
}

func (s *stream) finish() result {
	defer s.tr.CloseIdleConnections()
	defer s.body.Close()
	var r result
	for {
		d, err := s.next()
		if err != nil {
			if err != io.EOF {
				r.err = err
			}
			return r
		}
		if d == "[DONE]" {
			r.done = true
			continue
		}
		var chunk struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(d), &chunk); err != nil {
			r.errMsg = "bad chunk: " + d
			continue
		}
		if chunk.Error != nil {
			r.errMsg = chunk.Error.Message
		}
		if chunk.Usage != nil {
			r.tokens = chunk.Usage.CompletionTokens
		}
	}
}

// TestServesManyStreamsOnOnePort runs 200 concurrent streams against two
// frontends sharing one port and checks that each completes and that both
// frontends served some.
func TestServesManyStreamsOnOnePort(t *testing.T) {
	const n, maxTokens = 200, 16
	p, base := startLauncher(t, "--api-server-count", "2", "--sim-step-ms", "10")
	waitHealth(t, base, 60*time.Second)
	waitFrontends(t, base, 2)

	streams := make([]*stream, n)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Add(1)
		go func() { defer wg.Done(); streams[i] = openStream(t, base, maxTokens) }()
	}
	wg.Wait() // all n streams are open before any is read to its end
	if t.Failed() {
		t.FailNow()
	}
	results := make([]result, n)
	for i, s := range streams {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = s.finish() }()
	}
	wg.Wait()

	perFrontend := map[int]int{}
	for i, r := range results {
		if !r.done || r.err != nil || r.errMsg != "" || r.tokens != maxTokens {
			t.Errorf("stream %d (frontend %s): done=%v tokens=%d err=%v error event=%q",
				i, streams[i].frontend.FrontendID, r.done, r.tokens, r.err, r.errMsg)
		}
		perFrontend[streams[i].frontend.PID]++
	}
	if len(perFrontend) != 2 {
		t.Fatalf("streams per frontend pid: %v, want two frontends", perFrontend)
	}
	kids := childPIDs(t, p.Cmd.Process.Pid)
	for pid := range perFrontend {
		if !kids[pid] {
			t.Errorf("pid %d served streams but is not a child of the launcher (children %v)", pid, kids)
		}
	}
	t.Logf("streams per frontend pid: %v", perFrontend)
}

// TestKilledFrontendComesBack SIGKILLs one frontend mid-stream: only its
// streams are cut, the other frontend's complete, and a new frontend
// process takes its place.
func TestKilledFrontendComesBack(t *testing.T) {
	p, base := startLauncher(t, "--api-server-count", "2", "--sim-step-ms", "20")
	waitHealth(t, base, 60*time.Second)
	waitFrontends(t, base, 2)

	byPID := map[int][]*stream{}
	for tries := 0; tries < 60 && (len(byPID) < 2 || minLen(byPID) < 3); tries++ {
		s := openStream(t, base, 100) // 100 steps of 20 ms: ~2 s
		if s == nil {
			t.FailNow()
		}
		byPID[s.frontend.PID] = append(byPID[s.frontend.PID], s)
	}
	if len(byPID) < 2 || minLen(byPID) < 3 {
		t.Fatalf("could not get 3 streams on each frontend: %d frontends", len(byPID))
	}
	var victim, survivor int
	for pid := range byPID {
		if victim == 0 {
			victim = pid
		} else {
			survivor = pid
		}
	}
	for _, ss := range byPID { // every stream has started
		for _, s := range ss {
			if _, err := s.next(); err != nil {
				t.Fatalf("first chunk: %v", err)
			}
		}
	}
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatalf("kill frontend %d: %v", victim, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for pid, ss := range byPID {
		for _, s := range ss {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := s.finish()
				mu.Lock()
				defer mu.Unlock()
				switch {
				case pid == victim && r.done:
					t.Errorf("a stream of the killed frontend %d ended with [DONE]", victim)
				case pid == survivor && (!r.done || r.err != nil || r.errMsg != ""):
					t.Errorf("a stream of the surviving frontend %d broke: done=%v err=%v error event=%q", survivor, r.done, r.err, r.errMsg)
				}
			}()
		}
	}
	wg.Wait()

	// A new frontend process answers on the port, under a new identity.
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, err := freshVersion(base)
		if err == nil && v.PID != victim && v.PID != survivor {
			if !strings.HasSuffix(v.FrontendID, ".r1") {
				t.Errorf("restarted frontend id %q, want the .r1 suffix", v.FrontendID)
			}
			if !childPIDs(t, p.Cmd.Process.Pid)[v.PID] {
				t.Errorf("new frontend pid %d is not a child of the launcher", v.PID)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no restarted frontend answered /version within 20s (last: %+v, %v)", v, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestKilledEngineComesBack SIGKILLs engine-core: the launcher starts a new
// one on the same socket, the frontends notice the old one is gone (they
// answer 503 meanwhile; the window can be shorter than a poll), reconnect
// by themselves and serve again.
func TestKilledEngineComesBack(t *testing.T) {
	p, base := startLauncher(t, "--api-server-count", "2", "--sim-step-ms", "5", "--engine-liveness-timeout", "1s")
	waitHealth(t, base, 60*time.Second)
	waitFrontends(t, base, 2)
	engine := childNamed(t, p.Cmd.Process.Pid, "engine-core")
	if engine == 0 {
		t.Fatal("no engine-core child")
	}
	if err := syscall.Kill(engine, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !reported(p.Output(), "frontend-1 | ", "engine down") || !reported(p.Output(), "frontend-2 | ", "engine down") {
		if time.Now().After(deadline) {
			t.Fatal("the frontends did not both report the engine down within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitStatus(t, base, http.StatusOK, 30*time.Second)
	if !strings.Contains(p.Output(), "engine-core exited; restarting it") {
		t.Error("the launcher did not log the engine restart")
	}
	if again := childNamed(t, p.Cmd.Process.Pid, "engine-core"); again == 0 || again == engine {
		t.Fatalf("engine-core child after restart: %d (killed %d)", again, engine)
	}
	// Both frontends serve again (each reconnected by itself).
	served := map[int]bool{}
	deadline = time.Now().Add(30 * time.Second)
	for len(served) < 2 && time.Now().Before(deadline) {
		s, err := tryOpenStream(base, 8)
		if err != nil {
			// a frontend that has not reconnected yet answers 503
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if r := s.finish(); !r.done || r.err != nil || r.errMsg != "" {
			t.Fatalf("stream after engine restart on frontend %d: done=%v err=%v error event=%q", s.frontend.PID, r.done, r.err, r.errMsg)
		}
		served[s.frontend.PID] = true
	}
	if len(served) < 2 {
		t.Fatalf("only frontends %v served after the engine restart", served)
	}
}

// reported reports whether a line of out starts with prefix and contains s.
func reported(out, prefix, s string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, prefix) && strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// waitStatus polls /health on fresh connections until it answers want.
func waitStatus(t *testing.T, base string, want int, timeout time.Duration) {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	deadline := time.Now().Add(timeout)
	last := 0
	for {
		if resp, err := c.Get(base + "/health"); err == nil {
			resp.Body.Close()
			if last = resp.StatusCode; last == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health did not answer %d within %s (last %d)", want, timeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// childNamed returns the pid of pid's child running the program name, or 0.
func childNamed(t *testing.T, pid int, name string) int {
	t.Helper()
	for kid := range childPIDs(t, pid) {
		exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(kid), "exe"))
		if err == nil && filepath.Base(exe) == name {
			return kid
		}
	}
	return 0
}

func minLen(m map[int][]*stream) int {
	n := -1
	for _, v := range m {
		if n < 0 || len(v) < n {
			n = len(v)
		}
	}
	return n
}

// TestSIGTERMDrains sends SIGTERM to the launcher while streams run: every
// stream still completes with [DONE], then the launcher and all its
// children exit cleanly.
func TestSIGTERMDrains(t *testing.T) {
	const maxTokens = 75 // 75 steps of 20 ms: ~1.5 s after SIGTERM
	p, base := startLauncher(t, "--api-server-count", "2", "--sim-step-ms", "20", "--shutdown-timeout", "20s")
	waitHealth(t, base, 60*time.Second)
	waitFrontends(t, base, 2)
	kids := childPIDs(t, p.Cmd.Process.Pid)
	if len(kids) != 3 {
		t.Fatalf("launcher children %v, want engine-core and two frontends", kids)
	}

	var streams []*stream
	for range 12 {
		s := openStream(t, base, maxTokens)
		if s == nil {
			t.FailNow()
		}
		if _, err := s.next(); err != nil {
			t.Fatalf("first chunk: %v", err)
		}
		streams = append(streams, s)
	}
	sent := time.Now()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	results := make([]result, len(streams))
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = s.finish() }()
	}
	wg.Wait()
	for i, r := range results {
		if !r.done || r.err != nil || r.errMsg != "" || r.tokens != maxTokens {
			t.Errorf("stream %d on frontend %d: done=%v tokens=%d err=%v error event=%q",
				i, streams[i].frontend.PID, r.done, r.tokens, r.err, r.errMsg)
		}
	}
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("launcher exit code %d after SIGTERM, want 0", code)
	}
	if d := time.Since(sent); d > 15*time.Second {
		t.Errorf("drain took %s", d)
	}
	for pid := range kids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("child %d still running after the launcher exited", pid)
		}
	}
	out := p.Output()
	for _, want := range []string{"frontend stopped", "engine-core stopped"} {
		if !strings.Contains(out, want) {
			t.Errorf("launcher output lacks %q", want)
		}
	}
	// Frontends stop before the engine.
	if strings.LastIndex(out, "frontend stopped") > strings.Index(out, "engine-core stopped") {
		t.Errorf("engine-core stopped before the frontends")
	}
}

// TestStartupFailures checks that the launcher exits non-zero, with the
// failing child's own message, when the engine cannot start, when the
// frontends keep failing, or when the port is taken.
func TestStartupFailures(t *testing.T) {
	needBinaries(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() }) // after the parallel subtests
	heldPort := strconv.Itoa(held.Addr().(*net.TCPAddr).Port)

	tests := []struct {
		name string
		args []string
		want []string // substrings of the launcher's output
	}{
		{"bad model path", []string{"--model", "/nonexistent/model"},
			[]string{"engine-core exited (exit status 1) before it was ready", "\n    engine-core: load tokenizer of /nonexistent/model"}},
		{"bad engine flag", []string{"--executor", "gpu"},
			[]string{"engine-core exited (exit status 2) before it was ready", "\n    engine-core: --executor: must be"}},
		{"frontend keeps failing", []string{"--chat-template", "/nonexistent/template.jinja"},
			[]string{" exited 5 times in a row within 5s of starting", "\n    api-frontend: load chat template"}},
		{"port taken", []string{"--port", heldPort}, []string{"port not available"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, _ := startLauncher(t, append([]string{"--api-server-count", "2"}, tt.args...)...)
			if code := p.wait(t, 30*time.Second); code == 0 {
				t.Fatal("launcher exited 0")
			}
			out := p.Output()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("launcher output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// childPIDs returns the pids whose parent is pid.
func childPIDs(t *testing.T, pid int) map[int]bool {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	kids := map[int]bool{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			kids[p] = true
		}
	}
	return kids
}
